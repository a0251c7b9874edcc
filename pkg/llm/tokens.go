package llm

import (
	"hash/fnv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// offlineOnce installs tiktoken-go's offline loader. tiktoken-go keeps its
// loader in a package variable and would otherwise download the BPE files at
// run time, which quorum's machines cannot do.
var offlineOnce sync.Once

// Tokenizer counts tokens with the model's encoding, loading each encoding
// once. Unknown models (open models behind vLLM or Ollama) are estimated
// with cl100k_base.
type Tokenizer struct {
	mu   sync.Mutex
	encs map[string]*tiktoken.Tiktoken
	// counts caches the counts of long texts: agents resend the same
	// schema prompt on every turn of every candidate. pending holds counts
	// under way, so that the candidates of an example, starting together,
	// tokenize their shared prompt once rather than each.
	counts  map[countKey]int
	pending map[countKey]*pendingCount
}

type pendingCount struct {
	done chan struct{}
	n    int
}

type countKey struct {
	enc  string
	hash uint64
	n    int
}

// maxCachedCounts bounds the cache; it is cleared when full.
const maxCachedCounts = 4096

// NewTokenizer returns a Tokenizer that never touches the network.
func NewTokenizer() *Tokenizer {
	offlineOnce.Do(func() { tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader()) })
	return &Tokenizer{encs: map[string]*tiktoken.Tiktoken{}, counts: map[countKey]int{}, pending: map[countKey]*pendingCount{}}
}

// encodingName picks the encoding for a model name.
func encodingName(model string) string {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	for _, p := range []string{"gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o"} {
		if strings.HasPrefix(m, p) {
			return tiktoken.MODEL_O200K_BASE
		}
	}
	return tiktoken.MODEL_CL100K_BASE
}

func (t *Tokenizer) encoding(model string) *tiktoken.Tiktoken {
	name := encodingName(model)
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.encs[name]; ok {
		return e
	}
	e, err := encodings[name]()
	if err != nil {
		// The encodings are embedded; failing here means a broken build.
		panic("llm: load embedded encoding " + name + ": " + err.Error())
	}
	t.encs[name] = e
	return e
}

// encodings builds each embedded encoding once a process. Building one
// sorts its 100k-200k tokens (about a CPU-second; ten under the race
// detector) and the result is only read, so the Tokenizers of a process
// (every client and simulator has one) share it: a constant built late,
// not state.
var encodings = map[string]func() (*tiktoken.Tiktoken, error){
	tiktoken.MODEL_CL100K_BASE: sync.OnceValues(func() (*tiktoken.Tiktoken, error) { return tiktoken.GetEncoding(tiktoken.MODEL_CL100K_BASE) }),
	tiktoken.MODEL_O200K_BASE:  sync.OnceValues(func() (*tiktoken.Tiktoken, error) { return tiktoken.GetEncoding(tiktoken.MODEL_O200K_BASE) }),
}

// maxRunBytes is the longest run without space that is counted whole.
// tiktoken's byte-pair merge takes time quadratic in a run's length (64
// KiB of one letter took 4 s, a megabyte would take an hour), and a reply
// is whatever the endpoint sends: a longer run is counted in pieces of
// this size, off by a token a piece at most (no real token is this long).
// At 128 a prompt's lines (CSV rows, JSON) were cut and its counts moved
// (llmsim's canonical goldens); 1024 bounds a megabyte's count to about 2 s.
const maxRunBytes = 1024

// Count returns the number of tokens in text.
func (t *Tokenizer) Count(model, text string) int {
	n := 0
	for {
		a, b := longRun(text)
		if a < 0 {
			return n + t.count(model, text)
		}
		n += t.count(model, text[:a])
		for run := text[a:b]; len(run) > 0; {
			cut := len(clipUTF8(run, maxRunBytes))
			if cut == 0 { // no rune starts in the piece: not UTF-8
				cut = min(len(run), maxRunBytes)
			}
			n += len(t.encoding(model).Encode(run[:cut], nil, nil))
			run = run[cut:]
		}
		text = text[b:]
	}
}

// longRun finds the first run of text without ASCII space longer than
// maxRunBytes: its start and end, or -1, -1.
func longRun(text string) (int, int) {
	start := 0
	for i := 0; i <= len(text); i++ {
		if i < len(text) && !isASCIISpace(text[i]) {
			continue
		}
		if i-start > maxRunBytes {
			return start, i
		}
		start = i + 1
	}
	return -1, -1
}

func isASCIISpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// count is Count for text without long runs.
func (t *Tokenizer) count(model, text string) int {
	if len(text) < 1024 {
		return len(t.encoding(model).Encode(text, nil, nil))
	}
	if len(text) >= 4*chunkBytes {
		// Long prompts are mostly a database's schema, shared by every
		// example on it but holding each one's question: counted by
		// paragraph chunks, each cached, only the paragraphs that differ
		// are tokenized again. A token can merge across a blank line only
		// rarely, so the sum is off by a token per chunk at most; the
		// limiter reconciles its reservations with the provider's count
		// after each call.
		n := 0
		for len(text) > 0 {
			cut := chunkEnd(text)
			n += t.countCached(model, text[:cut])
			text = text[cut:]
		}
		return n
	}
	return t.countCached(model, text)
}

// chunkBytes is the least a chunk of a long text holds; it ends at the
// next blank line.
const chunkBytes = 2 << 10

// chunkEnd is where the first chunk of text ends: after the first blank
// line past chunkBytes, or the whole text.
func chunkEnd(text string) int {
	if len(text) > 2*chunkBytes {
		if i := strings.Index(text[chunkBytes:], "\n\n"); i >= 0 {
			return chunkBytes + i + 2
		}
	}
	return len(text)
}

// countCached counts a text through the cache, once across callers.
func (t *Tokenizer) countCached(model, text string) int {
	if len(text) < 1024 {
		return len(t.encoding(model).Encode(text, nil, nil))
	}
	h := fnv.New64a()
	h.Write([]byte(text))
	key := countKey{enc: encodingName(model), hash: h.Sum64(), n: len(text)}
	t.mu.Lock()
	if n, ok := t.counts[key]; ok {
		t.mu.Unlock()
		return n
	}
	if p, ok := t.pending[key]; ok {
		t.mu.Unlock()
		<-p.done
		return p.n
	}
	p := &pendingCount{done: make(chan struct{})}
	t.pending[key] = p
	t.mu.Unlock()
	p.n = len(t.encoding(model).Encode(text, nil, nil))
	t.mu.Lock()
	if len(t.counts) >= maxCachedCounts {
		clear(t.counts)
	}
	t.counts[key] = p.n
	delete(t.pending, key)
	t.mu.Unlock()
	close(p.done)
	return p.n
}

// CountMessages estimates a chat prompt's tokens as OpenAI counts them: the
// contents plus about 3 tokens of framing per message and 3 for the reply.
// Tool calls count their name, id and argument text.
func (t *Tokenizer) CountMessages(model string, msgs []Message) int {
	n := 3
	for _, m := range msgs {
		n += 3 + t.Count(model, m.Content) + 1
		if m.Name != "" {
			n += t.Count(model, m.Name) + 1
		}
		if m.ToolCallID != "" {
			n += t.Count(model, m.ToolCallID)
		}
		for _, tc := range m.ToolCalls {
			n += t.Count(model, tc.ID) + t.countCall(model, tc)
		}
	}
	return n
}

// CountTools estimates what tool definitions add to a prompt: their JSON
// text plus some framing (providers render them into the system prompt).
func (t *Tokenizer) CountTools(model string, tools []Tool) int {
	n := 0
	for _, tl := range tools {
		n += 8 + t.Count(model, tl.Name) + t.Count(model, tl.Description) + t.Count(model, string(tl.Parameters))
	}
	return n
}

// CountCompletion estimates a completion's tokens: its text and the
// functions it calls.
func (t *Tokenizer) CountCompletion(model, text string, calls []ToolCall) int {
	n := 0
	if text != "" {
		n = t.Count(model, text)
	}
	for _, tc := range calls {
		n += t.countCall(model, tc)
	}
	return n
}

func (t *Tokenizer) countCall(model string, tc ToolCall) int {
	return 3 + t.Count(model, tc.Name) + t.Count(model, tc.Arguments)
}

// Truncate returns the longest prefix of text that is at most n tokens
// (never splitting a UTF-8 sequence), and whether it cut anything.
func (t *Tokenizer) Truncate(model, text string, n int) (string, bool) {
	if n < 0 {
		n = 0
	}
	enc := t.encoding(model)
	ids := enc.Encode(text, nil, nil)
	if len(ids) <= n {
		return text, false
	}
	out := enc.Decode(ids[:n])
	// A token may end inside a multi-byte character; drop the partial one.
	for i := 0; i < utf8.UTFMax && len(out) > 0; i++ {
		if r, size := utf8.DecodeLastRuneInString(out); r != utf8.RuneError || size != 1 {
			break
		}
		out = out[:len(out)-1]
	}
	return out, true
}

// ContextWindow is the known context size of a model family, or 128k.
func ContextWindow(model string) int {
	m := strings.ToLower(model)
	switch {
	case strings.HasPrefix(m, "gpt-4.1"):
		return 1_047_576
	case strings.HasPrefix(m, "gpt-5"):
		return 400_000
	case strings.HasPrefix(m, "o1"), strings.HasPrefix(m, "o3"), strings.HasPrefix(m, "o4"):
		return 200_000
	case strings.HasPrefix(m, "gpt-4o"):
		return 128_000
	}
	return 128_000
}

// IsReasoningModel reports whether a model takes max_completion_tokens and
// reasoning effort instead of a temperature (o1, o3, o4 and gpt-5 families).
func IsReasoningModel(model string) bool {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if m == p || strings.HasPrefix(m, p+"-") || strings.HasPrefix(m, p+".") {
			return true
		}
	}
	return false
}
