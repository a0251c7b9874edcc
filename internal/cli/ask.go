package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/internal/app/serve"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// askClient asks one question of a quorum serve API.
type askClient struct {
	base, key string
	http      *http.Client
}

func (c *askClient) call(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("--server %s: %w", c.base, err)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		err = fmt.Errorf("quorum serve at %s: %w", c.base, err)
		if method == http.MethodPost && ctx.Err() == nil {
			// Nothing answers at --server: the input is wrong (exit 2).
			return nil, usage(err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		var e struct{ Error string }
		_ = json.Unmarshal(out, &e)
		if e.Error == "" {
			e.Error = strings.TrimSpace(string(out))
		}
		err := fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, terminalSafe(e.Error, false))
		switch resp.StatusCode {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
			// The question, its database or the key: the input is wrong.
			return nil, usage(err)
		}
		return nil, err
	}
	return out, nil
}

// ask posts the question and waits for its answer, cancelling it if ctx
// ends first (Ctrl-C).
func (c *askClient) ask(ctx context.Context, body map[string]any, progress io.Writer) (*serve.Question, error) {
	out, err := c.call(ctx, "POST", "/v1/questions", body)
	if err != nil {
		return nil, err
	}
	var a struct{ ID string }
	if err := json.Unmarshal(out, &a); err != nil || a.ID == "" {
		return nil, fmt.Errorf("quorum serve at %s answered %q, not a question id", c.base, out)
	}
	fmt.Fprintf(progress, "question %s", terminalSafe(a.ID, false))
	status := ""
	for {
		out, err := c.call(ctx, "GET", "/v1/questions/"+a.ID, nil)
		if err != nil {
			if ctx.Err() != nil {
				cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, _ = c.call(cctx, "DELETE", "/v1/questions/"+a.ID, nil)
				fmt.Fprintln(progress, ": cancelled")
			}
			return nil, err
		}
		var q serve.Question
		if err := json.Unmarshal(out, &q); err != nil {
			return nil, fmt.Errorf("question %s: %w", a.ID, err)
		}
		if q.Status != status {
			status = q.Status
			fmt.Fprintf(progress, " … %s", terminalSafe(status, false))
		}
		if q.Terminal() {
			fmt.Fprintln(progress)
			return &q, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// terminalSafe makes text from the model, the database or a server safe
// to print on a terminal: control characters (escape sequences can
// rewrite the screen, set the window title or hide text) and bidi
// overrides are shown as \xNN / \uNNNN escapes. With layout, newlines and
// tabs are kept and carriage returns dropped (SQL); without, newlines and
// tabs become spaces (a table cell).
func terminalSafe(s string, layout bool) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '\r' && layout:
			// CRLF line ends stay line ends; a lone CR would overwrite.
		case r == '\n' || r == '\t':
			if layout {
				b.WriteRune(r)
			} else {
				b.WriteByte(' ')
			}
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		case unicode.IsControl(r), r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// printAnswer shows the SQL, the result table, the confidence and the
// cost, every text from the server made terminalSafe.
func printAnswer(w io.Writer, q *serve.Question) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	if q.Status != serve.Answered {
		fmt.Fprintf(bw, "%s: %s\n", terminalSafe(q.Status, false), terminalSafe(q.Error, true))
		return
	}
	fmt.Fprintf(bw, "\n%s\n\n", terminalSafe(q.SQL, true))
	const maxWidth = 40
	cells := func(in []string) []string {
		out := make([]string, len(in))
		for i, c := range in {
			c = terminalSafe(c, false)
			if r := []rune(c); len(r) > maxWidth {
				c = string(r[:maxWidth-1]) + "…"
			}
			out[i] = c
		}
		return out
	}
	columns := cells(q.Columns)
	widths := make([]int, len(columns))
	for i, c := range columns {
		widths[i] = utf8.RuneCountInString(c)
	}
	shown := make([][]string, 0, min(len(q.Rows), 20))
	for _, r := range q.Rows[:min(len(q.Rows), 20)] {
		r = cells(r)
		shown = append(shown, r)
		for i := range widths {
			if i < len(r) {
				widths[i] = max(widths[i], utf8.RuneCountInString(r[i]))
			}
		}
	}
	row := func(cells []string) {
		for i := range widths {
			cell := ""
			if i < len(cells) {
				cell = cells[i]
			}
			fmt.Fprint(bw, cell, strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)+2))
		}
		fmt.Fprintln(bw)
	}
	row(columns)
	rule := make([]string, len(widths))
	for i, n := range widths {
		rule[i] = strings.Repeat("-", n)
	}
	row(rule)
	for _, r := range shown {
		row(r)
	}
	if q.RowCount > len(shown) {
		fmt.Fprintf(bw, "… %d rows in all\n", q.RowCount)
	}
	cached := ""
	if q.Cached {
		cached = " (from the cache)"
	}
	fmt.Fprintf(bw, "\nConfidence: %s (%s), %d of %d candidates agreed%s\n", terminalSafe(q.Confidence, false), terminalSafe(q.Method, false), len(q.Agreed), q.Candidates, cached)
	fmt.Fprintf(bw, "Cost: %d LLM calls, %d tokens, %d warehouse queries\n", q.Cost.LLMCalls, q.Cost.Tokens(), q.Cost.WarehouseQueries)
}

func newAskCmd() *cobra.Command {
	var (
		f                   serveFlags
		server, key, db     string
		knowledge, knowFile string
		asJSON, noCache     bool
	)
	cmd := &cobra.Command{
		Use:   "ask --db NAME QUESTION",
		Short: "Ask one question: of a running quorum serve (--server), or in this process over a dataset",
		Long: `ask sends one question to quorum serve's API and prints the SQL, the result
table, the confidence and the cost. With --server it asks a running serve
(its key from --api-key or QUORUM_API_KEY); without, it starts the runtime
in this process over --dataset, as serve would, and stops it afterwards.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			w := cmd.OutOrStdout()
			if db == "" {
				return usage(errors.New("--db is required: the database to ask about (GET /v1/databases lists them)"))
			}
			if knowFile != "" {
				b, err := os.ReadFile(knowFile)
				if err != nil {
					return usage(fmt.Errorf("--knowledge-file: %w", err))
				}
				knowledge = string(b)
			}
			body := map[string]any{"db": db, "question": args[0]}
			if knowledge != "" {
				body["external_knowledge"] = knowledge
			}
			if noCache {
				body["cache"] = false
			}
			fl := cmd.Flags()
			if fl.Changed("votes") {
				body["votes"] = f.votes
			}
			if fl.Changed("agent") {
				body["agent"] = f.agent
			}
			c := &askClient{base: strings.TrimRight(server, "/"), key: key, http: &http.Client{Timeout: time.Minute}}
			if server == "" {
				// Its Redis and NATS hold the question and its rows.
				if err := outputs.PrivateDir(f.stateDir); err != nil {
					return usage(fmt.Errorf("--state-dir: %w", err))
				}
				s, err := f.start(ctx, cmd.ErrOrStderr(), nil)
				if err != nil {
					return err
				}
				defer s.close()
				c.base = s.url
			}
			q, err := c.ask(ctx, body, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(q); err != nil {
					return err
				}
			} else {
				printAnswer(w, q)
			}
			if q.Status != serve.Answered {
				return &exitError{code: exitFailedExamples, msg: terminalSafe(fmt.Sprintf("question %s %s: %s", q.ID, q.Status, q.Error), true)}
			}
			return nil
		},
	}
	f.register(cmd, false)
	quietLogs(cmd, &f.cf.logLevel)
	fl := cmd.Flags()
	fl.StringVar(&server, "server", "", "URL of a running quorum serve (default: answer in this process over --dataset)")
	fl.StringVar(&key, "api-key", os.Getenv("QUORUM_API_KEY"), "API key for --server (env QUORUM_API_KEY); never printed")
	fl.StringVar(&db, "db", "", "database to ask about")
	fl.StringVar(&knowledge, "knowledge", "", "external knowledge sent with the question")
	fl.StringVar(&knowFile, "knowledge-file", "", "file whose text is the external knowledge")
	fl.BoolVar(&noCache, "no-cache", false, "do not answer from the cache")
	fl.BoolVar(&asJSON, "json", false, "print the answer as GET /v1/questions/{id} returns it")
	return cmd
}
