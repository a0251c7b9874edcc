package sqlite

import (
	"database/sql/driver"
	"errors"
	"slices"
	"strings"

	msqlite "modernc.org/sqlite"
)

// LIKE and GLOB: SQLite's patternCompare (func.c, 3.54) in Go, step for
// step, so that every answer is the built-in's; the only change is that
// the scan stops once the statement is interrupted. Strings are read as C
// strings (up to a NUL byte), as the built-in reads them.

// compareInfo is func.c's struct compareInfo.
type compareInfo struct {
	matchAll, matchOne, matchSet rune
	noCase                       bool
}

// patternCompare's results.
const (
	likeMatch = iota
	likeNoMatch
	likeNoWildcardMatch
)

var (
	errLikeTooComplex = errors.New("LIKE or GLOB pattern too complex")
	errLikeEscape     = errors.New("ESCAPE expression must be a single character")
)

// like is like(Y, X) and like(Y, X, E): X LIKE Y [ESCAPE E].
func (f *funcs) like(fc *msqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	if len(args) != 2 && len(args) != 3 {
		return nil, errors.New("wrong number of arguments to function like()")
	}
	return f.compare(fc, args, compareInfo{matchAll: '%', matchOne: '_', noCase: true})
}

// glob is glob(Y, X): X GLOB Y.
func (f *funcs) glob(fc *msqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	return f.compare(fc, args, compareInfo{matchAll: '*', matchOne: '?', matchSet: '['})
}

// compare is func.c's likeFunc: blobs never match (the driver's build has
// SQLITE_LIKE_DOESNT_MATCH_BLOBS), the pattern's length is bounded, an
// escape must be one character.
func (f *funcs) compare(fc *msqlite.FunctionContext, args []driver.Value, info compareInfo) (driver.Value, error) {
	_, pBlob := args[0].([]byte)
	_, sBlob := args[1].([]byte)
	if pBlob || sBlob {
		return int64(0), nil
	}
	pattern, pOK := textOf(fc, args[0])
	if len(pattern) > f.maxPattern {
		return nil, errLikeTooComplex
	}
	escape := info.matchSet
	if len(args) == 3 {
		e, ok := textOf(fc, args[2])
		if !ok {
			return nil, nil
		}
		e = cString(e)
		if n := len(slices.Collect(chars(e))); n != 1 {
			return nil, errLikeEscape
		}
		i := 0
		escape = utf8Read(e, &i)
		if escape == info.matchAll {
			info.matchAll = 0
		}
		if escape == info.matchOne {
			info.matchOne = 0
		}
	}
	s, sOK := textOf(fc, args[1])
	if !pOK || !sOK {
		return nil, nil
	}
	m := &likeMatcher{info: info, stop: newStopper(fc)}
	r := m.compare(cString(pattern), 0, cString(s), 0, escape)
	if m.err != nil {
		return nil, m.err
	}
	if r == likeMatch {
		return int64(1), nil
	}
	return int64(0), nil
}

// cString is s up to its first NUL byte.
func cString(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// utf8Read is sqlite3Utf8Read: one character of s at *i (0 past the end),
// malformed sequences decoded SQLite's way.
func utf8Read(s string, i *int) rune {
	if *i >= len(s) {
		*i++
		return 0
	}
	c := uint32(s[*i])
	*i++
	if c < 0xc0 {
		return rune(c)
	}
	c = utf8Trans1(c)
	for *i < len(s) && isContinuation(s[*i]) {
		c = c<<6 + uint32(s[*i]&0x3f)
		*i++
	}
	if c < 0x80 || c&0xfffff800 == 0xd800 {
		c = 0xfffd
	}
	return rune(c)
}

// utf8Trans1 is sqlite3Utf8Trans1: the payload bits of a lead byte.
func utf8Trans1(c uint32) uint32 {
	switch {
	case c < 0xe0:
		return c & 0x1f
	case c < 0xf0:
		return c & 0x0f
	case c < 0xf8:
		return c & 0x07
	case c < 0xfc:
		return c & 0x03
	case c < 0xfe:
		return c & 0x01
	}
	return 0
}

// byteAt is s[i], or the terminating NUL.
func byteAt(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// readChar reads one character the way patternCompare's inline fast path
// does (an ASCII byte as itself, otherwise sqlite3Utf8Read).
func readChar(s string, i *int) rune {
	if b := byteAt(s, *i); b < 0x80 {
		*i++
		return rune(b)
	}
	return utf8Read(s, i)
}

func lowerASCII(c rune) rune {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func upperASCII(c rune) rune {
	if c >= 'a' && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

// likeMatcher runs one comparison; err is set once the statement was
// interrupted, and every level then returns at once.
type likeMatcher struct {
	info compareInfo
	stop *stopper
	err  error
}

func (m *likeMatcher) tick(n int) bool {
	if m.err == nil {
		m.err = m.stop.tick(n)
	}
	return m.err != nil
}

// compare is patternCompare(zPattern+pi, zString+si, pInfo, matchOther).
func (m *likeMatcher) compare(p string, pi int, s string, si int, matchOther rune) int {
	info := m.info
	zEscaped := -1 // one past the last escaped pattern character
	for {
		c := readChar(p, &pi)
		if c == 0 {
			break
		}
		if m.tick(1) {
			return likeNoWildcardMatch
		}
		if c == info.matchAll {
			return m.compareAll(p, pi, s, si, matchOther)
		}
		if c == matchOther {
			if info.matchSet == 0 {
				c = utf8Read(p, &pi)
				if c == 0 {
					return likeNoMatch
				}
				zEscaped = pi
			} else {
				if !m.matchSet(p, &pi, s, &si) {
					return likeNoMatch
				}
				continue
			}
		}
		c2 := readChar(s, &si)
		if c == c2 {
			continue
		}
		if info.noCase && c < 0x80 && c2 < 0x80 && lowerASCII(c) == lowerASCII(c2) {
			continue
		}
		if c == info.matchOne && pi != zEscaped && c2 != 0 {
			continue
		}
		return likeNoMatch
	}
	if byteAt(s, si) == 0 {
		return likeMatch
	}
	return likeNoMatch
}

// compareAll continues compare after a "%" or "*" at p[pi-1].
func (m *likeMatcher) compareAll(p string, pi int, s string, si int, matchOther rune) int {
	info := m.info
	var c rune
	// Skip further "*"s, and "?"s, each "?" consuming one character.
	for {
		c = readChar(p, &pi)
		if c != info.matchAll && (c != info.matchOne || info.matchOne == 0) {
			break
		}
		if c == info.matchOne && utf8Read(s, &si) == 0 {
			return likeNoWildcardMatch
		}
	}
	if c == 0 {
		return likeMatch // a trailing "*" matches the rest
	}
	if c == matchOther {
		if info.matchSet == 0 {
			c = utf8Read(p, &pi)
			if c == 0 {
				return likeNoWildcardMatch
			}
		} else {
			// "[...]" right after "*": try it at every character.
			for byteAt(s, si) != 0 {
				if r := m.compare(p, pi-1, s, si, matchOther); r != likeNoMatch {
					return r
				}
				if m.tick(1) {
					return likeNoWildcardMatch
				}
				b := s[si]
				si++
				if b >= 0xc0 {
					for isContinuation(byteAt(s, si)) {
						si++
					}
				}
			}
			return likeNoWildcardMatch
		}
	}
	// Find c (or, without case, either case of an ASCII c) in the string
	// and try the rest of the pattern from just after it.
	if c < 0x80 {
		stop := string(c)
		if info.noCase {
			stop = string(upperASCII(c)) + string(lowerASCII(c))
		}
		for {
			j := strings.IndexAny(s[min(si, len(s)):], stop)
			if m.tick(max(j, 1)) {
				return likeNoWildcardMatch
			}
			if j < 0 {
				break
			}
			si += j + 1
			if r := m.compare(p, pi, s, si, matchOther); r != likeNoMatch {
				return r
			}
		}
		return likeNoWildcardMatch
	}
	for {
		c2 := readChar(s, &si)
		if c2 == 0 {
			break
		}
		if m.tick(1) {
			return likeNoWildcardMatch
		}
		if c2 != c {
			continue
		}
		if r := m.compare(p, pi, s, si, matchOther); r != likeNoMatch {
			return r
		}
	}
	return likeNoWildcardMatch
}

// matchSet matches a GLOB "[...]" (its "[" already read) against one
// character of the string.
func (m *likeMatcher) matchSet(p string, pi *int, s string, si *int) bool {
	var priorC rune
	seen, invert := false, false
	c := utf8Read(s, si)
	if c == 0 {
		return false
	}
	c2 := utf8Read(p, pi)
	if c2 == '^' {
		invert = true
		c2 = utf8Read(p, pi)
	}
	if c2 == ']' {
		if c == ']' {
			seen = true
		}
		c2 = utf8Read(p, pi)
	}
	for c2 != 0 && c2 != ']' {
		if c2 == '-' && byteAt(p, *pi) != ']' && byteAt(p, *pi) != 0 && priorC > 0 {
			c2 = utf8Read(p, pi)
			if c >= priorC && c <= c2 {
				seen = true
			}
			priorC = 0
		} else {
			if c == c2 {
				seen = true
			}
			priorC = c2
		}
		c2 = utf8Read(p, pi)
	}
	return c2 != 0 && seen != invert
}
