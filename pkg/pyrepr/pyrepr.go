// Package pyrepr renders values the way CPython's str() does.
//
// Spider 2.0's evaluator and ReFoRCE's vote sort result columns by the Python
// text form of each value, and pandas writes floats with repr(); matching
// verdicts therefore needs Python's text forms exactly, which Go's %v and
// strconv 'g' formatting do not give (1e+06 vs 1000000.0, 1 vs 1.0).
package pyrepr

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Float returns CPython's repr(f): the shortest round-trip digits, positional
// when the decimal exponent is in [-4, 16), always with ".0" or an exponent.
func Float(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	// 'e' with -1 precision gives the shortest digits: d.ddde±XX.
	s := strconv.FormatFloat(f, 'e', -1, 64)
	neg := false
	if s[0] == '-' {
		neg = true
		s = s[1:]
	}
	mant, expText, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expText)
	digits := strings.Replace(mant, ".", "", 1)
	var out string
	if exp < -4 || exp >= 16 {
		out = digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		sign := "+"
		if exp < 0 {
			sign = "-"
			exp = -exp
		}
		e := strconv.Itoa(exp)
		if len(e) < 2 {
			e = "0" + e
		}
		out += "e" + sign + e
	} else {
		point := exp + 1 // digits before the decimal point
		switch {
		case point <= 0:
			out = "0." + strings.Repeat("0", -point) + digits
		case point >= len(digits):
			out = digits + strings.Repeat("0", point-len(digits)) + ".0"
		default:
			out = digits[:point] + "." + digits[point:]
		}
	}
	if neg {
		return "-" + out
	}
	return out
}

// Bool returns Python's str(b).
func Bool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// Bytes returns Python's repr of a bytes value (b'...'), which is how pandas
// writes BLOB cells to CSV.
func Bytes(b []byte) string {
	quote := byte('\'')
	if strings.IndexByte(string(b), '\'') >= 0 && strings.IndexByte(string(b), '"') < 0 {
		quote = '"'
	}
	var sb strings.Builder
	sb.WriteString("b")
	sb.WriteByte(quote)
	const hex = "0123456789abcdef"
	for _, c := range b {
		switch {
		case c == quote || c == '\\':
			sb.WriteByte('\\')
			sb.WriteByte(c)
		case c == '\t':
			sb.WriteString(`\t`)
		case c == '\n':
			sb.WriteString(`\n`)
		case c == '\r':
			sb.WriteString(`\r`)
		case c < 0x20 || c >= 0x7f:
			sb.WriteString(`\x`)
			sb.WriteByte(hex[c>>4])
			sb.WriteByte(hex[c&0xf])
		default:
			sb.WriteByte(c)
		}
	}
	sb.WriteByte(quote)
	return sb.String()
}

// Datetime returns Python's str() of a datetime: "2006-01-02 15:04:05",
// ".ffffff" when there are microseconds, and "+HH:MM" for aware values —
// what pandas writes for the warehouses' date-time columns.
func Datetime(t time.Time, aware bool) string {
	s := t.Format("2006-01-02 15:04:05")
	if us := t.Nanosecond() / 1000; us != 0 {
		s += fmt.Sprintf(".%06d", us)
	}
	if aware {
		s += t.Format("-07:00")
	}
	return s
}

// Clock returns Python's str() of a time of day.
func Clock(t time.Time) string {
	s := t.Format("15:04:05")
	if us := t.Nanosecond() / 1000; us != 0 {
		s += fmt.Sprintf(".%06d", us)
	}
	return s
}
