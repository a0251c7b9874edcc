package trace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// Export is an example's whole trace, texts resolved: what a run writes
// to its output folder and quorum trace --json prints.
type Export struct {
	Run     string   `json:"run"`
	Example string   `json:"example"`
	Agent   string   `json:"agent,omitempty"`
	Level   string   `json:"level,omitempty"`
	Entries []*Entry `json:"entries"`
	// Texts holds the long texts the entries refer to, each once (the
	// prompt eight candidates share); Resolve puts them in place.
	Texts map[string]string `json:"texts,omitempty"`
}

// Resolve puts the texts of x.Texts in place in the entries.
func (x *Export) Resolve() {
	for _, e := range x.Entries {
		e.Texts(func(t *Text) {
			if s, ok := x.Texts[t.Ref]; ok && t.Ref != "" {
				t.S = s
			}
		})
	}
	x.Texts = nil
}

// Export reads the trace of run's example ex with each long text once, in
// Texts.
func (s *Store) Export(ctx context.Context, run, ex string) (*Export, error) {
	entries, err := s.Read(ctx, run, ex, false)
	if err != nil {
		return nil, err
	}
	refs := refsOf(entries)
	texts, err := s.texts(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("trace of %s in run %s: %w", ex, run, err)
	}
	return &Export{Run: run, Example: ex, Entries: entries, Texts: texts}, nil
}

// Lost stands for a text the blob store no longer holds (expired, or
// lost with a Redis that restarted from an older snapshot): the rest of
// the trace is still worth reading.
const Lost = "(this text is no longer stored)"

// texts reads refs' texts; one the store does not hold reads as Lost.
func (s *Store) texts(ctx context.Context, refs []string) (map[string]string, error) {
	out := make(map[string]string, len(refs))
	got, err := s.Blobs.GetMany(ctx, refs)
	if err == nil {
		for i, r := range refs {
			out[r] = got[i]
		}
		return out, nil
	}
	// One at a time, to tell the lost texts from the rest.
	for _, r := range refs {
		t, err := s.Blobs.GetMany(ctx, []string{r})
		switch {
		case err == nil:
			out[r] = t[0]
		case errors.Is(err, agent.ErrBlobLost):
			out[r] = Lost
		default:
			return nil, err
		}
	}
	return out, nil
}

func refsOf(entries []*Entry) []string {
	var refs []string
	for _, e := range entries {
		e.Texts(func(t *Text) {
			if t.Ref != "" {
				refs = append(refs, t.Ref)
			}
		})
	}
	slices.Sort(refs)
	return slices.Compact(refs)
}

// Inline is the longest text an entry holds itself; longer ones go to the
// blob store, where equal texts (the schema prompt of eight candidates)
// are one blob.
const Inline = 256

// Lists is where an example's entries are appended and read (runstate's
// trace list).
type Lists interface {
	AppendTrace(ctx context.Context, run, ex string, entries ...[]byte) error
	Trace(ctx context.Context, run, ex string) ([][]byte, error)
}

// Blobs is the content-addressed store of long texts: PutMany names each
// text RefOf it; GetMany's error for a reference it no longer holds
// matches agent.ErrBlobLost.
type Blobs interface {
	RefOf(text string) string
	PutMany(ctx context.Context, texts []string) ([]string, error)
	GetMany(ctx context.Context, refs []string) ([]string, error)
}

// Store writes and reads examples' traces.
type Store struct {
	Lists Lists
	Blobs Blobs

	// stored remembers the texts this process stored lately, so the
	// prompt an example's eight candidates share crosses the network
	// once, not eight times. Cleared when full.
	mu     sync.Mutex
	stored map[string]struct{}
}

// recentTexts bounds Store.stored.
const recentTexts = 8192

// Write appends entries to the trace of run's example ex, their long texts
// stored as blobs first.
func (s *Store) Write(ctx context.Context, run, ex string, entries ...*Entry) error {
	var texts, refs []string
	var slots []*Text
	s.mu.Lock()
	for _, e := range entries {
		e.Texts(func(t *Text) {
			if len(t.S) <= Inline {
				return
			}
			ref := s.Blobs.RefOf(t.S)
			if _, ok := s.stored[ref]; !ok {
				texts, refs = append(texts, t.S), append(refs, ref)
			}
			slots = append(slots, t)
			t.Ref = ref
		})
	}
	s.mu.Unlock()
	got, err := s.Blobs.PutMany(ctx, texts)
	if err != nil {
		return fmt.Errorf("trace of %s in run %s: %w", ex, run, err)
	}
	if !slices.Equal(got, refs) {
		return fmt.Errorf("trace of %s in run %s: the blob store named %d texts differently than their hashes", ex, run, len(refs))
	}
	s.mu.Lock()
	if s.stored == nil || len(s.stored)+len(refs) > recentTexts {
		s.stored = make(map[string]struct{}, recentTexts)
	}
	for _, r := range refs {
		s.stored[r] = struct{}{}
	}
	s.mu.Unlock()
	for _, t := range slots {
		t.S = ""
	}
	enc := make([][]byte, len(entries))
	for i, e := range entries {
		if enc[i], err = json.Marshal(e); err != nil {
			return fmt.Errorf("trace of %s in run %s: %w", ex, run, err)
		}
	}
	return s.Lists.AppendTrace(ctx, run, ex, enc...)
}

// Read returns the trace of run's example ex in time order, its texts
// resolved when resolve is set (else long texts stay references).
func (s *Store) Read(ctx context.Context, run, ex string, resolve bool) ([]*Entry, error) {
	raw, err := s.Lists.Trace(ctx, run, ex)
	if err != nil {
		return nil, err
	}
	out := make([]*Entry, 0, len(raw))
	for i, b := range raw {
		var e Entry
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, fmt.Errorf("trace of %s in run %s, entry %d: %w", ex, run, i, err)
		}
		out = append(out, &e)
	}
	Sort(out)
	if !resolve {
		return out, nil
	}
	return out, s.Resolve(ctx, out)
}

// Resolve replaces the entries' blob references with their texts.
func (s *Store) Resolve(ctx context.Context, entries []*Entry) error {
	byRef, err := s.texts(ctx, refsOf(entries))
	if err != nil {
		return fmt.Errorf("trace texts: %w", err)
	}
	for _, e := range entries {
		e.Texts(func(t *Text) {
			if t.Ref != "" {
				t.S = byRef[t.Ref]
			}
		})
	}
	return nil
}

// Sort orders entries by start time, a decision after the tasks that
// ended before it.
func Sort(entries []*Entry) {
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].At.Before(entries[j].At) })
}

func sortSteps(steps []Step) {
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].At.Before(steps[j].At) })
}

// messagesJSON is messages as the GenAI conventions' content attributes
// hold them.
func messagesJSON(ms []llm.Message) string {
	type part struct {
		Type    string `json:"type"`
		Content string `json:"content,omitempty"`
		Name    string `json:"name,omitempty"`
		Args    string `json:"arguments,omitempty"`
		ID      string `json:"id,omitempty"`
	}
	type msg struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	out := make([]msg, 0, len(ms))
	for _, m := range ms {
		x := msg{Role: m.Role}
		if m.Content != "" {
			x.Parts = append(x.Parts, part{Type: "text", Content: m.Content})
		}
		for _, tc := range m.ToolCalls {
			x.Parts = append(x.Parts, part{Type: "tool_call", Name: tc.Name, Args: tc.Arguments, ID: tc.ID})
		}
		out = append(out, x)
	}
	b, _ := json.Marshal(out)
	return strings.TrimSpace(string(b))
}
