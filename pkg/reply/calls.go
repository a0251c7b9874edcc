package reply

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Call is a function call a model wrote in its text rather than as a
// native tool call: a JSON object naming a function and its arguments
// (Hermes-style <tool_call>{…}</tool_call>, a bare {"name": …,
// "arguments": …}, OpenAI's {"function": {…}} shape) or a
// <function=NAME><parameter=KEY>VALUE</parameter></function> block.
// Args is the arguments as a JSON object.
type Call struct {
	Name string
	Args string
	// End is the offset in the text just past the call.
	End int
}

var nameKeys = []string{"name", "function", "tool", "tool_name", "command", "action"}
var argKeys = []string{"arguments", "args", "parameters", "params", "input", "tool_input", "action_input"}

// Calls returns the function calls written in text, in order.
func Calls(text string) []Call {
	text = clean(text)
	var out []Call
	for _, r := range jsonRegions(text) {
		var v any
		body := text[r.start:r.end]
		if json.Unmarshal([]byte(body), &v) != nil && json.Unmarshal([]byte(Repair(body)), &v) != nil {
			continue
		}
		for _, c := range callsIn(v) {
			c.End = r.end
			out = append(out, c)
		}
	}
	out = append(out, xmlCalls(text)...)
	sortCalls(out)
	return out
}

func sortCalls(cs []Call) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].End < cs[j-1].End; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// callsIn finds call objects at any depth of a decoded JSON value.
func callsIn(v any) []Call {
	switch x := v.(type) {
	case []any:
		var out []Call
		for _, e := range x {
			out = append(out, callsIn(e)...)
		}
		return out
	case map[string]any:
		if c, ok := callOf(x); ok {
			return []Call{c}
		}
		var out []Call
		for _, e := range x {
			out = append(out, callsIn(e)...)
		}
		return out
	case string:
		// Arguments or a whole call double-encoded as a string.
		var inner any
		if s := strings.TrimSpace(x); strings.HasPrefix(s, "{") && json.Unmarshal([]byte(s), &inner) == nil {
			return callsIn(inner)
		}
	}
	return nil
}

// callOf reads one object as a call: a name and arguments, or a
// "function" object holding them.
func callOf(m map[string]any) (Call, bool) {
	if f, ok := m["function"].(map[string]any); ok {
		if c, ok := callOf(f); ok {
			return c, true
		}
	}
	name := ""
	for _, k := range nameKeys {
		if s, ok := m[k].(string); ok && nameWord.MatchString(strings.TrimSpace(s)) {
			name = strings.TrimSpace(s)
			break
		}
	}
	if name == "" {
		return Call{}, false
	}
	for _, k := range argKeys {
		a, ok := m[k]
		if !ok {
			continue
		}
		switch x := a.(type) {
		case map[string]any:
			b, _ := json.Marshal(x)
			return Call{Name: name, Args: string(b)}, true
		case string:
			if f, err := Args(x); err == nil {
				b, _ := json.Marshal(map[string]any(f))
				return Call{Name: name, Args: string(b)}, true
			}
		case nil:
			return Call{Name: name, Args: "{}"}, true
		}
	}
	if len(m) == 1 {
		return Call{Name: name, Args: "{}"}, true // {"name": "read_table_names"}
	}
	return Call{}, false
}

var nameWord = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)

var xmlFunction = regexp.MustCompile(`(?s)<function=([A-Za-z_][A-Za-z0-9_.-]*)>(.*?)(?:</function>|$)`)
var xmlParameter = regexp.MustCompile(`(?s)<parameter=([A-Za-z_][A-Za-z0-9_.-]*)>(.*?)(?:</parameter>|$)`)

// xmlCalls reads <function=NAME><parameter=KEY>VALUE</parameter></function>
// (Qwen3-Coder's and Llama's tool-call templates).
func xmlCalls(text string) []Call {
	var out []Call
	for _, m := range xmlFunction.FindAllStringSubmatchIndex(text, -1) {
		name, body := text[m[2]:m[3]], text[m[4]:m[5]]
		args := map[string]any{}
		for _, p := range xmlParameter.FindAllStringSubmatch(body, -1) {
			args[p[1]] = strings.TrimSpace(p[2])
		}
		b, _ := json.Marshal(args)
		out = append(out, Call{Name: name, Args: string(b), End: m[1]})
	}
	return out
}
