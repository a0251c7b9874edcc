package reply

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Fields is a JSON object a model wrote, read leniently: the accessors
// accept the types models write for a field instead of the schema's (a
// string "false" for a boolean, a number as text), and alternative names
// for a key (sql for sql_query).
type Fields map[string]any

// JSON finds the JSON object of a reply and decodes it: the last ```json
// block, else the last balanced {…} in the text (JSON inside prose),
// reasoning removed. Python literals (True, False, None), single-quoted
// strings, trailing commas and comments are repaired first. A tool call's
// arguments sent as a JSON string holding the object are unwrapped, and so
// is an object in a JSON string at any depth, in a reply of its own (an
// array holding ["{\"correct\": true}"], a string holding a tag holding
// the object).
func JSON(text string) (Fields, error) { return jsonText(text, 0) }

// jsonText is JSON for a text depth JSON strings deep.
func jsonText(text string, depth int) (Fields, error) {
	vis := Visible(text)
	var cands []string
	bs := Blocks(vis)
	for i := len(bs) - 1; i >= 0; i-- {
		if bs[i].Lang == "json" || bs[i].Lang == "json5" || (bs[i].Lang == "" && strings.HasPrefix(bs[i].Body, "{")) {
			cands = append(cands, bs[i].Body)
		}
	}
	cands = append(cands, objects(vis)...)
	// Arrays too: one may hold the object as a JSON string (["{\"a\": 1}"]),
	// whose braces objects skips as a string's.
	for _, r := range jsonRegions(vis) {
		if vis[r.start] == '[' {
			cands = append(cands, vis[r.start:r.end])
		}
	}
	if len(cands) == 0 {
		return nil, &Unreadable{Problem: "no JSON object in the reply", Reask: "Answer with one JSON object in a ```json block."}
	}
	var firstErr error
	for _, c := range cands {
		f, err := decodeObject(c, depth)
		if err == nil {
			return f, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, &Unreadable{Problem: "the reply's JSON could not be parsed: " + firstErr.Error(),
		Reask: "Your JSON could not be parsed (" + firstErr.Error() + "). Answer with one valid JSON object in a ```json block."}
}

// Args decodes a tool call's arguments leniently (see JSON).
func Args(raw string) (Fields, error) {
	t := strings.TrimSpace(raw)
	if t == "" {
		return Fields{}, nil
	}
	f, err := decodeObject(t, 0)
	if err == nil {
		return f, nil
	}
	return JSON(raw)
}

func decodeObject(text string, depth int) (Fields, error) {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		if err2 := json.Unmarshal([]byte(Repair(text)), &v); err2 != nil {
			return nil, err
		}
	}
	if m, ok := objectIn(v, depth); ok {
		return Fields(m), nil
	}
	if s, ok := v.(string); ok {
		return nil, fmt.Errorf("a string, not an object: %q", truncate(s, 60))
	}
	return nil, fmt.Errorf("not a JSON object but %T", v)
}

// objectIn is the object a decoded value holds: itself; the object a
// string holds, read as a reply of its own (arguments double-encoded, a
// tag around the object), up to maxDepth strings deep; the last element
// of an array that holds one.
func objectIn(v any, depth int) (map[string]any, bool) {
	switch x := v.(type) {
	case map[string]any:
		return x, true
	case string:
		if depth < maxDepth && strings.ContainsAny(x, "{[") {
			if f, err := jsonText(x, depth+1); err == nil {
				return f, true
			}
		}
	case []any:
		for i := len(x) - 1; i >= 0; i-- {
			if m, ok := objectIn(x[i], depth); ok {
				return m, true
			}
		}
	}
	return nil, false
}

// objects returns the balanced {…} spans of text, last first.
func objects(text string) []string {
	var out []string
	for end := strings.LastIndexByte(text, '}'); end >= 0; end = strings.LastIndexByte(text[:end], '}') {
		if start := matchOpen(text, end); start >= 0 {
			out = append(out, text[start:end+1])
			if len(out) == 4 {
				break
			}
		}
	}
	return out
}

// matchOpen finds the '{' that balances the '}' at end, ignoring braces in
// double-quoted strings; -1 if none.
func matchOpen(text string, end int) int {
	depth := 0
	inStr := false
	for i := end; i >= 0; i-- {
		c := text[i]
		if inStr {
			if c == '"' && (i == 0 || text[i-1] != '\\') {
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '}':
			depth++
		case '{':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// Repair rewrites the almost-JSON models write into JSON: Python's True,
// False and None, single-quoted strings, trailing commas before } or ],
// and // or # line comments outside strings.
func Repair(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			j := endOfString(s, i, '"')
			b.WriteString(s[i:j])
			i = j - 1
		case c == '\'':
			j := endOfString(s, i, '\'')
			inner := s[i+1 : max(i+1, j-1)]
			inner = strings.ReplaceAll(inner, `\'`, `'`)
			q, _ := json.Marshal(inner)
			b.Write(q)
			i = j - 1
		case c == ',':
			k := i + 1
			for k < len(s) && strings.IndexByte(" \t\r\n", s[k]) >= 0 {
				k++
			}
			if k < len(s) && (s[k] == '}' || s[k] == ']') {
				continue
			}
			b.WriteByte(c)
		case c == '#' || (c == '/' && i+1 < len(s) && s[i+1] == '/'):
			for i < len(s) && s[i] != '\n' {
				i++
			}
			if i < len(s) {
				b.WriteByte('\n')
			}
		case isIdentStart(c):
			j := i
			for j < len(s) && (isIdentStart(s[j]) || (s[j] >= '0' && s[j] <= '9')) {
				j++
			}
			k := j
			for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
				k++
			}
			switch w := s[i:j]; {
			case k < len(s) && s[k] == ':':
				// An unquoted key, as JavaScript allows.
				b.WriteString(strconv.Quote(w))
			case w == "True":
				b.WriteString("true")
			case w == "False":
				b.WriteString("false")
			case w == "None":
				b.WriteString("null")
			default:
				b.WriteString(w)
			}
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isIdentStart(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// endOfString returns the index just past the string literal opened at i.
func endOfString(s string, i int, q byte) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			return j + 1
		}
	}
	return len(s)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// String returns the first of keys present as text (numbers and booleans
// formatted); ok is false when none is present or it is an object/list.
func (f Fields) String(keys ...string) (string, bool) {
	for _, k := range keys {
		v, present := f.get(k)
		if !present || v == nil {
			continue
		}
		switch x := v.(type) {
		case string:
			return x, true
		case float64:
			return strconv.FormatFloat(x, 'f', -1, 64), true
		case bool:
			return strconv.FormatBool(x), true
		}
	}
	return "", false
}

// Bool reads a boolean written as true/false, "true"/"false" in any case,
// "yes"/"no", 1/0 or "1"/"0". present is false when no key is there; an
// error names a value that is none of these (never read as either).
func (f Fields) Bool(keys ...string) (value, present bool, err error) {
	for _, k := range keys {
		v, ok := f.get(k)
		if !ok || v == nil {
			continue
		}
		b, err := ParseBool(v)
		if err != nil {
			return false, true, fmt.Errorf("field %q: %w", k, err)
		}
		return b, true, nil
	}
	return false, false, nil
}

// ParseBool reads one JSON value as a boolean (see Fields.Bool).
func ParseBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case float64:
		if x == 0 || x == 1 {
			return x == 1, nil
		}
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "true", "yes", "1", "y", "t":
			return true, nil
		case "false", "no", "0", "n", "f":
			return false, nil
		}
	}
	return false, fmt.Errorf("%v is not a boolean", v)
}

// List returns the first of keys holding a list of objects; a single
// object where a list was asked for is a list of one.
func (f Fields) List(keys ...string) ([]Fields, bool) {
	for _, k := range keys {
		v, ok := f.get(k)
		if !ok {
			continue
		}
		switch x := v.(type) {
		case []any:
			out := make([]Fields, 0, len(x))
			for _, e := range x {
				switch y := e.(type) {
				case map[string]any:
					out = append(out, Fields(y))
				case string:
					// A list of bare queries.
					out = append(out, Fields{"sql_query": y})
				}
			}
			return out, true
		case map[string]any:
			return []Fields{Fields(x)}, true
		case string:
			if g, err := decodeList(x); err == nil {
				return g, true
			}
		}
	}
	return nil, false
}

func decodeList(s string) ([]Fields, error) {
	var v []map[string]any
	if err := json.Unmarshal([]byte(Repair(s)), &v); err != nil {
		return nil, err
	}
	out := make([]Fields, len(v))
	for i, m := range v {
		out[i] = Fields(m)
	}
	return out, nil
}

// get finds a key exactly, else case-insensitively (models write
// "SQL_Query" as often as the schema's "sql_query").
func (f Fields) get(k string) (any, bool) {
	level := []map[string]any{f}
	// The object itself first, then the objects nested in it, a level
	// at a time: a verdict wrapped as {"response": {"verdict": {…}}}
	// is read like a bare one.
	for depth := 0; depth < 4 && len(level) > 0; depth++ {
		for _, m := range level {
			if v, ok := m[k]; ok {
				return v, true
			}
			for name, v := range m {
				if strings.EqualFold(name, k) {
					return v, true
				}
			}
		}
		var next []map[string]any
		for _, m := range level {
			keys := make([]string, 0, len(m))
			for name := range m {
				keys = append(keys, name)
			}
			sort.Strings(keys) // one order whatever the map's
			for _, name := range keys {
				next = append(next, objectsOf(m[name])...)
			}
		}
		level = next
	}
	return nil, false
}

// objectsOf is the JSON objects v holds directly: itself, the objects of
// an array, the object a string holds (objectIn).
func objectsOf(v any) []map[string]any {
	switch x := v.(type) {
	case map[string]any:
		return []map[string]any{x}
	case []any:
		var out []map[string]any
		for _, e := range x {
			switch y := e.(type) {
			case map[string]any:
				out = append(out, y)
			case string:
				out = append(out, objectsOf(y)...)
			}
		}
		return out
	case string:
		if m, ok := objectIn(x, 0); ok {
			return []map[string]any{m}
		}
	}
	return nil
}
