package llmsim

// What the simulator said under a persona, remembered so its answers do
// not depend on the persona. Agents re-send the model's earlier replies as
// they received them, dressed; the answer draws hash the conversation, so
// they would move with the dress. The Server remembers, for each dressed
// reply it sent, the canonical reply it dressed; a request's history is
// read with the canonical content in place of each remembered reply. A
// re-ask after a remembered reply (it was cut, or could not be read) gets
// that reply's canonical answer again, as a real model asked again gives
// its answer again; and once answered, the pair (reply, re-ask) drops out
// of the history the draws see, so later answers are canonical's too. A
// dressed reply the memory does not hold (evicted, or sent by another
// simulator process) is read as it is: still correct, only not invariant.

import (
	"container/list"
	"encoding/binary"
	"hash/fnv"
	"regexp"
	"strings"
	"sync"
)

// Memory bounds: enough for a benchmark's whole run (a few hundred
// replies per example), small enough for a long-lived simulator.
const (
	memoryMaxEntries = 1 << 16
	memoryMaxBytes   = 64 << 20
)

// memory is a size-capped LRU map from a dressed reply's key to the
// canonical reply it dressed.
type memory struct {
	maxEntries, maxBytes int

	mu      sync.Mutex
	bytes   int
	order   *list.List // of *memEntry, most recently used first
	entries map[uint64]*list.Element
}

type memEntry struct {
	key uint64
	rep reply
	cut bool // the persona cut the reply short (canonical's was whole)
	// refusal: the persona refused where canonical answered.
	refusal bool
	size    int
}

func newMemory(maxEntries, maxBytes int) *memory {
	return &memory{maxEntries: maxEntries, maxBytes: maxBytes, order: list.New(), entries: map[uint64]*list.Element{}}
}

// messageKey names an assistant message by the conversation before it
// (prefix, read canonically) and what the agent echoes: its text (trimmed)
// and its calls' ids, names and arguments.
func messageKey(prefix uint64, text string, calls []wireToolCall) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], prefix)
	h.Write(b[:])
	h.Write([]byte(keyText(text)))
	for _, c := range calls {
		h.Write([]byte{1})
		h.Write([]byte(c.ID))
		h.Write([]byte{1})
		h.Write([]byte(c.Function.Name))
		h.Write([]byte{1})
		h.Write([]byte(c.Function.Arguments))
	}
	return h.Sum64()
}

// invisible are what a client may drop or rewrite in a reply it echoes
// (a BOM, zero-width spaces, CRLF, NBSP), so the key does not see them.
var invisible = strings.NewReplacer("\ufeff", "", "\u200b", "", "\r\n", "\n", "\u00a0", " ")

// keyText is the text a message key hashes.
func keyText(text string) string {
	if strings.ContainsAny(text, "\ufeff\u200b\r\u00a0") {
		text = invisible.Replace(text)
	}
	return strings.TrimSpace(text)
}

var thinkEnd = regexp.MustCompile(`(?i)</think(?:ing)?>`)

// withoutThink is text after its last closing think tag: what an agent
// that drops the reasoning echoes (RAISE's re-ask does).
func withoutThink(text string) (string, bool) {
	locs := thinkEnd.FindAllStringIndex(text, -1)
	if len(locs) == 0 {
		return "", false
	}
	return text[locs[len(locs)-1][1]:], true
}

// prefixKey hashes a conversation, message by message.
func prefixKey(msgs []wireMessage) uint64 {
	h := fnv.New64a()
	for _, m := range msgs {
		h.Write([]byte(m.Role))
		h.Write([]byte{0})
		h.Write([]byte(m.Content))
		h.Write([]byte{0})
		h.Write([]byte(m.ToolCallID))
		for _, c := range m.ToolCalls {
			h.Write([]byte{1})
			h.Write([]byte(c.ID))
			h.Write([]byte{1})
			h.Write([]byte(c.Function.Name))
			h.Write([]byte{1})
			h.Write([]byte(c.Function.Arguments))
		}
		h.Write([]byte{2})
	}
	return h.Sum64()
}

// remember records that dressed was sent for canon, in answer to a
// conversation whose canonical reading hashes to prefix.
func (m *memory) remember(prefix uint64, dressed, canon reply) {
	cut := dressed.finish == "length" && canon.finish != "length"
	canon.reasoning, canon.reasoningTokens, canon.nullContent = "", 0, false
	size := len(canon.text) + 64
	for _, c := range canon.calls {
		size += len(c.ID) + len(c.Function.Name) + len(c.Function.Arguments)
	}
	keys := []uint64{messageKey(prefix, dressed.text, dressed.calls)}
	if vis, ok := withoutThink(dressed.text); ok {
		keys = append(keys, messageKey(prefix, vis, dressed.calls))
	}
	if dressed.text == "" && dressed.reasoning != "" {
		// A reply given only in reasoning_content: an agent may echo it
		// as the content it read.
		keys = append(keys, messageKey(prefix, dressed.reasoning, dressed.calls))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		if el, ok := m.entries[k]; ok {
			m.bytes -= el.Value.(*memEntry).size
			m.order.Remove(el)
		}
		m.entries[k] = m.order.PushFront(&memEntry{key: k, rep: canon, cut: cut, refusal: dressed.refusal, size: size})
		m.bytes += size
	}
	for m.order.Len() > 0 && (m.order.Len() > m.maxEntries || m.bytes > m.maxBytes) {
		el := m.order.Back()
		e := el.Value.(*memEntry)
		m.order.Remove(el)
		delete(m.entries, e.key)
		m.bytes -= e.size
	}
}

// lookup is the canonical reply of an assistant message the simulator
// sent dressed.
func (m *memory) lookup(prefix uint64, msg wireMessage) (memEntry, bool) {
	k := messageKey(prefix, msg.Content, msg.ToolCalls)
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.entries[k]
	if !ok {
		return memEntry{}, false
	}
	m.order.MoveToFront(el)
	return *el.Value.(*memEntry), true
}

// canonicalMessage is msg with the canonical reply's content.
func canonicalMessage(msg wireMessage, canon reply) wireMessage {
	msg.Content = canon.text
	msg.ToolCalls = nil
	for _, c := range canon.calls {
		msg.ToolCalls = append(msg.ToolCalls, wireToolCall{ID: c.ID, Type: c.Type, Function: c.Function})
	}
	return msg
}

// sameAnswer reports whether two canonical replies are the same answer.
func sameAnswer(a, b reply) bool {
	if a.text != b.text || len(a.calls) != len(b.calls) {
		return false
	}
	for i := range a.calls {
		if a.calls[i].ID != b.calls[i].ID || a.calls[i].Function != b.calls[i].Function {
			return false
		}
	}
	return true
}

// reaskPhrases are what the agents say when a reply could not be used
// (pkg/reply's re-asks, ReFoRCE's, PExA's and RAISE's; llmsim does not
// import the agents, so they are repeated here, and TestReaskPhrases
// pins them to the agents' text).
var reaskPhrases = []string{
	MarkerReaskFence, MarkerReaskOne,
	"Your reply was cut off", "Your reply has no SQL query", "Your reply was empty", "Your reply could not be used",
	"You must call one of the tools", "you must use one of the tools", "Your verdict could not be read",
}

var exploreReask = regexp.MustCompile(`^You wrote \d+ queries\.`)

// isReask reports whether the messages after an assistant reply only ask
// for it again: re-ask sentences, tool results saying the reply's
// arguments could not be read, or (after a cut reply or a refusal) the
// same prompt once more; after a refusal, any message of no known kind.
func isReask(after []wireMessage, prev memEntry, calls []wireToolCall, prevUser string) bool {
	if len(after) == 0 {
		return false
	}
	ids := map[string]bool{}
	for _, c := range calls {
		ids[c.ID] = true
	}
	for _, m := range after {
		switch m.Role {
		case "user":
			if (prev.cut || prev.refusal) && prevUser != "" && m.Content == prevUser || exploreReask.MatchString(m.Content) {
				continue
			}
			if prev.refusal && Classify(m.Content) == KindUnknown {
				// After a refusal, a message that asks for no new kind of
				// answer asks again, in whatever words the agent uses.
				continue
			}
			found := false
			for _, p := range reaskPhrases {
				if strings.Contains(m.Content, p) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		case "tool":
			if !ids[m.ToolCallID] || !strings.Contains(m.Content, "not understood") && !strings.Contains(m.Content, "could not be read") {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// undress reads a request's history in canonical form: each remembered
// reply as the canonical reply it dressed, and each remembered reply that
// was re-asked and answered again left out with its re-asks. When the
// request itself is a re-ask of a remembered reply, again is that reply's
// canonical answer.
func (m *memory) undress(req chatRequest) (out chatRequest, again *reply) {
	var msgs []wireMessage
	var prev memEntry
	var prevCalls []wireToolCall
	prevAt, prevUser, lastUser := -1, "", ""
	for _, msg := range req.Messages {
		if msg.Role != "assistant" {
			if msg.Role == "user" {
				lastUser = msg.Content
			}
			msgs = append(msgs, msg)
			continue
		}
		e, ok := m.lookup(prefixKey(msgs), msg)
		if !ok {
			msgs = append(msgs, msg)
			prevAt = -1
			continue
		}
		if prevAt >= 0 && sameAnswer(prev.rep, e.rep) && isReask(msgs[prevAt+1:], prev, prevCalls, prevUser) {
			// Asked again and answered the same: canonical saw one reply.
			msgs = msgs[:prevAt]
		}
		prev, prevAt, prevUser, prevCalls = e, len(msgs), lastUser, msg.ToolCalls
		msgs = append(msgs, canonicalMessage(msg, e.rep))
	}
	out = req
	out.Messages = msgs
	if prevAt >= 0 && isReask(msgs[prevAt+1:], prev, prevCalls, prevUser) {
		rep := prev.rep
		return out, &rep
	}
	return out, nil
}
