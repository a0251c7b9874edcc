package llm

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Every byte an endpoint sends is bounded. A reply stops at a size derived
// from the request's completion bound (max_tokens): its text, reasoning
// and tool-call arguments together at MaxReplyBytes, the bytes read off
// the wire at a multiple of it. The client then closes the connection and
// returns what it kept as a reply cut by its length (FinishReason
// "length", Response.CutAt), as the endpoint would have at max_tokens; an
// endpoint that streams without end (317 MiB → 3.5 GB in 40 s before) costs
// a bounded read. Error bodies are cut short instead: their status is what
// the client needs.

// Reply bounds, per token of the completion bound.
const (
	// replyBytesPerToken: a token averages about 4 bytes of text; 16
	// leaves room for long tokens (runs of spaces or symbols) and
	// multi-byte scripts.
	replyBytesPerToken = 16
	// replyMargin is added to every bound, so a small max_tokens still
	// leaves room for what endpoints add (tool-call ids and names).
	replyMargin = 64 << 10
	// defaultReplyTokens stands for the completion bound of a request
	// that sets none: the most current models write in one completion.
	defaultReplyTokens = 128 << 10
	// wireBytesPerToken bounds a stream's bytes per token: one SSE event
	// per token, with its JSON envelope, content-filter annotations and
	// padding, takes a few hundred.
	wireBytesPerToken = 1 << 10
	// jsonBytesPerByte bounds a whole completion's JSON per byte of its
	// text (an escape such as \u0000 takes 6).
	jsonBytesPerByte = 6
	// wireMargin is added to every wire bound (headers of the first and
	// last events, usage, a JSON envelope).
	wireMargin = 1 << 20
	// junkBytesPerToken bounds a stream's bytes on lines without data
	// (keep-alive comments, event: and id: lines a gateway may send with
	// every event), per token, beyond wireMargin: go-openai keeps them
	// all, to read an error from them when the stream ends.
	junkBytesPerToken = 64
	// maxErrorBody is as much of an error response's body as is read (it
	// ends up in the error's text); an API error is a few hundred bytes.
	maxErrorBody = 16 << 10
)

// errReplyBound is a reply that passed its size bound: the client stops
// reading it and returns what it has, cut.
var errReplyBound = errors.New("the reply passed its size bound")

// MaxReplyBytes is the most text a reply to a request whose completion is
// bounded by maxTokens (0: unbounded) may hold, its text, reasoning and
// tool calls together; the client cuts a longer reply there.
func MaxReplyBytes(maxTokens int) int {
	return replyTokens(maxTokens)*replyBytesPerToken + replyMargin
}

func replyTokens(maxTokens int) int {
	if maxTokens <= 0 {
		return defaultReplyTokens
	}
	return min(maxTokens, defaultReplyTokens*64) // no overflow, whatever is asked
}

// wireBytes is the most the client reads of a 2xx response to a request
// bounded by maxTokens: streamed, a wire's worth per token; whole, the
// JSON of the longest reply.
func wireBytes(maxTokens int, stream bool) int64 {
	if stream {
		return int64(replyTokens(maxTokens))*wireBytesPerToken + wireMargin
	}
	return int64(MaxReplyBytes(maxTokens))*jsonBytesPerByte + wireMargin
}

// bodyLimits are the bounds on one response body.
type bodyLimits struct {
	// wire bounds the body's bytes, line one line's (0: none), junk the
	// bytes on lines that carry no data (0: not counted).
	wire, line, junk int64
	// truncate ends the body at wire (an error body) instead of failing
	// the read.
	truncate bool
}

// limitsFor are the bounds on a response to a request bounded by
// maxTokens, streamed or not.
func limitsFor(resp *http.Response, maxTokens int, stream bool) bodyLimits {
	if resp.StatusCode/100 != 2 {
		return bodyLimits{wire: maxErrorBody, truncate: true}
	}
	lim := bodyLimits{wire: wireBytes(maxTokens, stream)}
	if stream {
		// One event may carry the whole reply, JSON-escaped.
		lim.line = int64(MaxReplyBytes(maxTokens))*jsonBytesPerByte + replyMargin
		if strings.Contains(resp.Header.Get("Content-Type"), "text/event-stream") {
			lim.junk = int64(replyTokens(maxTokens))*junkBytesPerToken + wireMargin
		}
	}
	return lim
}

// boundedBody is a response body that ends at its limits: with
// errReplyBound once it has given more than lim.wire bytes, a line longer
// than lim.line or more than lim.junk bytes of lines without data; or,
// truncating, with io.EOF at lim.wire.
type boundedBody struct {
	io.ReadCloser
	lim bodyLimits
	// read counts the bytes given, line those of the current line, junk
	// those of lines without data; inJunk says the current line is one,
	// midLine that it has begun.
	read, line, junk int64
	inJunk, midLine  bool
	err              error
}

func newBoundedBody(body io.ReadCloser, lim bodyLimits) *boundedBody {
	return &boundedBody{ReadCloser: body, lim: lim}
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	// One byte past the bound tells a body over it from one that ends there.
	if room := b.lim.wire - b.read + 1; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	b.count(p[:n])
	if over := b.over(); over != nil {
		if b.lim.truncate {
			n -= int(b.read - b.lim.wire)
			over = io.EOF
		}
		b.err = over
		return max(n, 0), over
	}
	return n, err
}

// over is errReplyBound once the body passed a limit.
func (b *boundedBody) over() error {
	if b.read > b.lim.wire || (b.lim.line > 0 && b.line > b.lim.line) || (b.lim.junk > 0 && b.junk > b.lim.junk) {
		return errReplyBound
	}
	return nil
}

// count follows the lines of p: their length, and the bytes of those
// that carry no data (SSE data lines start with "data:"; blank lines
// separate events and are kept by no one).
func (b *boundedBody) count(p []byte) {
	if b.lim.line == 0 && b.lim.junk == 0 {
		return // a whole body: its bytes are all that is bounded
	}
	for len(p) > 0 {
		if !b.midLine {
			b.midLine, b.line = true, 0
			b.inJunk = p[0] != 'd' && p[0] != '\r' && p[0] != '\n'
		}
		k := bytes.IndexByte(p, '\n')
		seg := p
		if k >= 0 {
			seg = p[:k+1]
			b.midLine = false
		}
		b.line += int64(len(seg))
		if b.inJunk {
			b.junk += int64(len(seg))
		}
		p = p[len(seg):]
	}
}

// replyCap keeps a reply's text, reasoning and tool calls within its
// bound as they arrive; full says it was reached.
type replyCap struct {
	left int
	full bool
}

// take returns s, or what of it fits in what is left (at a rune boundary).
func (c *replyCap) take(s string) string {
	if len(s) <= c.left {
		c.left -= len(s)
		return s
	}
	s = clipUTF8(s, c.left)
	c.left, c.full = 0, true
	return s
}

// clipUTF8 is s cut to at most n bytes without splitting a rune.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// bound cuts r to bytes of text, reasoning and tool calls (in that order
// of priority) and reports whether it cut anything.
func (r *Response) bound(bytes int) bool {
	c := replyCap{left: bytes}
	r.Text = c.take(r.Text)
	r.Reasoning = c.take(r.Reasoning)
	for i := range r.ToolCalls {
		tc := &r.ToolCalls[i]
		tc.ID, tc.Name, tc.Arguments = c.take(tc.ID), c.take(tc.Name), c.take(tc.Arguments)
	}
	return c.full
}
