package pyrepr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// JSON returns the Python repr of the JSON value in data as json.load would
// produce it: dicts in key order, ints for integer literals, floats for the
// rest, None, True, False. ReFoRCE's prompts show sample rows that way.
func JSON(data []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var b strings.Builder
	if err := writeValue(&b, dec); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeValue(b *strings.Builder, dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			b.WriteByte('{')
			first := true
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				if !first {
					b.WriteString(", ")
				}
				first = false
				b.WriteString(Str(kt.(string)))
				b.WriteString(": ")
				if err := writeValue(b, dec); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			b.WriteByte('}')
		case '[':
			b.WriteByte('[')
			first := true
			for dec.More() {
				if !first {
					b.WriteString(", ")
				}
				first = false
				if err := writeValue(b, dec); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			b.WriteByte(']')
		default:
			return fmt.Errorf("unexpected %v", t)
		}
	case string:
		b.WriteString(Str(t))
	case json.Number:
		s := t.String()
		if strings.ContainsAny(s, ".eE") {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return err
			}
			b.WriteString(Float(f))
		} else {
			b.WriteString(s)
		}
	case bool:
		b.WriteString(Bool(t))
	case nil:
		b.WriteString("None")
	default:
		return io.ErrUnexpectedEOF
	}
	return nil
}

// Str returns Python's repr of a str: single quotes unless the text holds a
// single quote and no double quote, with backslash escapes for the quote,
// backslash, \n, \r, \t and other control characters.
func Str(s string) string {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r < 0xa0:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

// List returns Python's repr of a list of strings.
func List(items []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(Str(s))
	}
	b.WriteByte(']')
	return b.String()
}
