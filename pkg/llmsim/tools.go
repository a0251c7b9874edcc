package llmsim

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"github.com/quorumsql/quorum/pkg/llm"
)

// wireMessage is a chat message as OpenAI clients send it.
type wireMessage struct {
	Role       string         `json:"role"`
	Content    string         `json:"content"`
	Name       string         `json:"name,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	// Marked: a content part carries an Anthropic-style cache_control
	// breakpoint (the prefix through this message may be cached).
	Marked bool `json:"-"`
}

// UnmarshalJSON reads content as OpenAI's API takes it: a string, null,
// or an array of parts, whose text parts are joined (clients and proxies
// send parts, with cache_control on some for Anthropic's prompt cache).
func (m *wireMessage) UnmarshalJSON(b []byte) error {
	type plain wireMessage
	var raw struct {
		plain
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = wireMessage(raw.plain)
	c := bytes.TrimSpace(raw.Content)
	switch {
	case len(c) == 0 || bytes.Equal(c, []byte("null")):
		return nil
	case c[0] == '"':
		return json.Unmarshal(c, &m.Content)
	}
	var parts []struct {
		Type         string          `json:"type"`
		Text         string          `json:"text"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	if err := json.Unmarshal(c, &parts); err != nil {
		return fmt.Errorf("content: a string or an array of parts: %w", err)
	}
	var text strings.Builder
	for i, p := range parts {
		if p.Type != "text" {
			return fmt.Errorf("content part %d is of type %q: the simulator reads text parts only", i, p.Type)
		}
		text.WriteString(p.Text)
		m.Marked = m.Marked || len(p.CacheControl) > 0 && !bytes.Equal(p.CacheControl, []byte("null"))
	}
	m.Content = text.String()
	return nil
}

type wireToolCall struct {
	Index    *int         `json:"index,omitempty"` // streaming chunks only
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// stopList is OpenAI's stop: one string, a list, or null.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = stopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("stop must be a string or a list of strings")
	}
	*s = many
	return nil
}

// toolChoice is a parsed tool_choice: a mode ("", auto, none, required) or
// the name of the function to call.
type toolChoice struct {
	mode, name string
}

func parseToolChoice(raw json.RawMessage, tools []wireTool) (toolChoice, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return toolChoice{}, nil
	}
	var mode string
	if err := json.Unmarshal(raw, &mode); err == nil {
		switch mode {
		case "", llm.ToolChoiceAuto, llm.ToolChoiceNone, llm.ToolChoiceRequired:
			if mode == llm.ToolChoiceRequired && len(tools) == 0 {
				return toolChoice{}, errors.New(`tool_choice "required" needs tools`)
			}
			return toolChoice{mode: mode}, nil
		}
		return toolChoice{}, fmt.Errorf("tool_choice %q: use auto, none, required or {\"type\":\"function\",\"function\":{\"name\":...}}", mode)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" || named.Function.Name == "" {
		return toolChoice{}, fmt.Errorf("tool_choice %s: want a mode or {\"type\":\"function\",\"function\":{\"name\":...}}", raw)
	}
	for _, t := range tools {
		if t.Function.Name == named.Function.Name {
			return toolChoice{name: named.Function.Name}, nil
		}
	}
	return toolChoice{}, fmt.Errorf("tool_choice names function %q, which is not in tools", named.Function.Name)
}

func checkTools(tools []wireTool) error {
	for i, t := range tools {
		if t.Type != "function" || t.Function.Name == "" {
			return fmt.Errorf("tools[%d]: want {\"type\":\"function\",\"function\":{\"name\":...}}", i)
		}
		if len(t.Function.Parameters) > 0 && string(t.Function.Parameters) != "null" {
			var obj map[string]any
			if err := json.Unmarshal(t.Function.Parameters, &obj); err != nil {
				return fmt.Errorf("tools[%d] %s: parameters must be a JSON schema object: %v", i, t.Function.Name, err)
			}
		}
	}
	return nil
}

// wantsToolCall applies the tool choice: "required" or a named function
// always call; "auto" calls until a tool result has come back since the
// last user message, then answers in text.
func wantsToolCall(req chatRequest, c toolChoice) bool {
	if len(req.Tools) == 0 || c.mode == llm.ToolChoiceNone {
		return false
	}
	if c.mode == llm.ToolChoiceRequired || c.name != "" {
		return true
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		switch req.Messages[i].Role {
		case "tool":
			return false
		case "user":
			return true
		}
	}
	return true
}

// toolCall builds the simulated call: to the named tool, else the first
// that takes SQL, else the first; a SQL argument carries the SQL the text
// answer would hold, the others are filled from the schema.
func toolCall(tools []wireTool, c toolChoice, text, id string) wireToolCall {
	pick := tools[0]
	for _, t := range tools {
		if c.name != "" && t.Function.Name == c.name {
			pick = t
			break
		}
		if c.name == "" && takesSQL(t.Function.Parameters) {
			pick = t
			break
		}
	}
	sql := "SELECT 1"
	if b := llm.Blocks(text, "sql"); len(b) > 0 {
		sql = b[0]
	}
	var schema map[string]any
	_ = json.Unmarshal(pick.Function.Parameters, &schema) // checked by checkTools
	// Unescaped, as a model writes it: "a <> b", not "a \u003c\u003e b".
	var args strings.Builder
	enc := json.NewEncoder(&args)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(objectFor(schema, sql))
	return wireToolCall{ID: id, Type: "function", Function: wireFunction{Name: pick.Function.Name, Arguments: strings.TrimSuffix(args.String(), "\n")}}
}

// sqlLike reports whether a property is where a query goes.
func sqlLike(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "sql") || strings.Contains(n, "query")
}

func takesSQL(params json.RawMessage) bool {
	var schema map[string]any
	if json.Unmarshal(params, &schema) != nil {
		return false
	}
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		if ps, ok := p.(map[string]any); ok && typeOf(ps) == "string" && sqlLike(name) {
			return true
		}
	}
	return false
}

// typeOf is a schema's type, the first non-null one of a list.
func typeOf(schema map[string]any) string {
	switch t := schema["type"].(type) {
	case string:
		return t
	case []any:
		for _, v := range t {
			if s, ok := v.(string); ok && s != "null" {
				return s
			}
		}
	}
	if _, ok := schema["properties"]; ok {
		return "object"
	}
	return ""
}

// objectFor fills an object schema's required properties, and any string
// property that takes SQL, deterministically (keys in order).
func objectFor(schema map[string]any, sql string) map[string]any {
	out := map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ps, _ := props[name].(map[string]any)
		if ps == nil {
			ps = map[string]any{}
		}
		if required[name] || typeOf(ps) == "string" && sqlLike(name) {
			out[name] = valueFor(name, ps, sql)
		}
	}
	return out
}

func valueFor(name string, schema map[string]any, sql string) any {
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	if d, ok := schema["default"]; ok {
		return d
	}
	switch typeOf(schema) {
	case "integer", "number":
		if m, ok := schema["minimum"].(float64); ok && m > 0 {
			return m
		}
		return 0
	case "boolean":
		return false
	case "array":
		return []any{}
	case "object":
		return objectFor(schema, sql)
	case "null":
		return nil
	}
	if sqlLike(name) {
		return sql
	}
	return "llmsim simulated " + name
}

// callID names a simulated call after the request it answers, so the same
// request gets the same id.
func (s *Server) callID(req chatRequest, choice toolChoice, all string, i int) string {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], s.cfg.Seed)
	h.Write(b[:])
	if req.Seed != nil {
		binary.LittleEndian.PutUint64(b[:], uint64(*req.Seed))
		h.Write(b[:])
	}
	h.Write([]byte(all))
	for _, t := range append([]string{choice.mode, choice.name}, req.toolNames()...) {
		h.Write([]byte(t))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("call_%016x_%d", h.Sum64(), i)
}

// messages converts the wire messages for counting.
func (req chatRequest) messages() []llm.Message {
	out := make([]llm.Message, len(req.Messages))
	for i, m := range req.Messages {
		out[i] = llm.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			out[i].ToolCalls = append(out[i].ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
	}
	return out
}

func (req chatRequest) toolNames() []string {
	out := make([]string, len(req.Tools))
	for i, t := range req.Tools {
		out[i] = t.Function.Name
	}
	return out
}

func (req chatRequest) tools() []llm.Tool {
	out := make([]llm.Tool, len(req.Tools))
	for i, t := range req.Tools {
		out[i] = llm.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters}
	}
	return out
}
