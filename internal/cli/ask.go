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

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/pkg/serve"
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
		return nil, fmt.Errorf("quorum serve at %s: %w", c.base, err)
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
		err := fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, e.Error)
		if resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnauthorized {
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
	fmt.Fprintf(progress, "question %s", a.ID)
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
			fmt.Fprintf(progress, " … %s", status)
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

// printAnswer shows the SQL, the result table, the confidence and the
// cost.
func printAnswer(w io.Writer, q *serve.Question) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	if q.Status != serve.Answered {
		fmt.Fprintf(bw, "%s: %s\n", q.Status, q.Error)
		return
	}
	fmt.Fprintf(bw, "\n%s\n\n", q.SQL)
	widths := make([]int, len(q.Columns))
	for i, c := range q.Columns {
		widths[i] = min(len(c), 40)
	}
	shown := q.Rows[:min(len(q.Rows), 20)]
	for _, r := range shown {
		for i := range widths {
			if i < len(r) {
				widths[i] = max(widths[i], min(len(r[i]), 40))
			}
		}
	}
	row := func(cells []string) {
		for i := range widths {
			cell := ""
			if i < len(cells) {
				cell = cells[i]
			}
			if len(cell) > 40 {
				cell = cell[:39] + "…"
			}
			fmt.Fprintf(bw, "%-*s  ", widths[i], cell)
		}
		fmt.Fprintln(bw)
	}
	row(q.Columns)
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
	fmt.Fprintf(bw, "\nConfidence: %s (%s), %d of %d candidates agreed%s\n", q.Confidence, q.Method, len(q.Agreed), q.Candidates, cached)
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
		Args: cobra.ExactArgs(1),
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
				if err := os.MkdirAll(f.stateDir, 0o755); err != nil {
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
				return &exitError{code: exitFailedExamples, msg: fmt.Sprintf("question %s %s: %s", q.ID, q.Status, q.Error)}
			}
			return nil
		},
	}
	f.register(cmd, false)
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
