package dbinfo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
)

// DefaultLinkBudget is the prompt size (bytes, UTF-8) from which tables are
// linked: the reference's THRESHOLD, compared with the size of the
// example's prompts.txt (schema_linking.py:14,55).
const DefaultLinkBudget = 200_000

// LinkAnswer is the model's verdict on one table.
type LinkAnswer struct {
	Table   string   `json:"table"`
	Think   string   `json:"think"`
	Related bool     `json:"related"`
	Columns []string `json:"columns"`
	// Failed is set when no usable answer came after every attempt; the
	// table is then kept, because recall matters more than size here.
	Failed bool   `json:"failed,omitempty"`
	Error  string `json:"error,omitempty"`
}

// LinkCache keeps answers by (database, table, question) so a rerun does not
// pay twice.
type LinkCache interface {
	Get(ctx context.Context, key string) (LinkAnswer, bool, error)
	Put(ctx context.Context, key string, a LinkAnswer) error
}

// Linker runs table-level schema linking: one LLM call per table block.
type Linker struct {
	LLM   llm.Client
	Cache LinkCache
	// Budget: prompts of at least this many bytes are linked (default
	// DefaultLinkBudget).
	Budget int
	// Temperature of the linking calls; nil means 0, the reference's
	// (schema_linking.py:166). It overrides the link role's configured
	// temperature, as every agent's per-request temperature does.
	Temperature *float64
	// Parallel bounds the calls in flight for one example (default 8);
	// the shared limiter bounds them cluster-wide.
	Parallel int
	// Attempts per table (default 3).
	Attempts int
}

// LinkQuestion is what linking needs to know about an example.
type LinkQuestion struct {
	ID, Question, ExternalKnowledge string
	// Seed makes the calls reproducible (per example and table).
	Seed int64
}

// NeedsLinking reports whether the example's prompt is over budget: the
// whole prompt (table blocks after the oversize rules, external knowledge,
// structure line; what the reference wrote to prompts.txt) measured in
// bytes of UTF-8, linked from Budget bytes on, as the reference compared
// os.path.getsize(prompts.txt) with its threshold (schema_linking.py:55).
func (l *Linker) NeedsLinking(info *Info, externalKnowledge string) bool {
	return PromptBytes(info, externalKnowledge) >= l.budget()
}

func (l *Linker) budget() int {
	if l.Budget <= 0 {
		return DefaultLinkBudget
	}
	return l.Budget
}

// PromptBytes is the linking trigger's measure of an example's prompt: its
// size in bytes of UTF-8.
func PromptBytes(info *Info, externalKnowledge string) int {
	return len(info.Prompt(externalKnowledge))
}

// LinkPrompt is the reference's table-level schema-linking prompt (paper
// Figure 3) for one table block.
func LinkPrompt(block, question, external string) string {
	if strings.TrimSpace(external) == "" {
		external = "None"
	}
	return "You are doing table level schema linking. Given a table with schema information and the task, you should think step by step and decide whether this table is related to the task.\n" +
		"You should answer Y/N only. If the answer is Y, you should add columns that you think related in python list format.\n" +
		"Please answer only in json code block like:\n```json\n{\n  \"think\": \"think step by step to decide\",\n  \"answer\": \"Y or N only\",\n  \"columns\": [col_name1, col_name2]\n}\n```\n" +
		"Table info: " + block + "\n" +
		"Task: " + question + "\n" +
		"External knowledge: " + external + "\n"
}

func cacheKey(db, table, question string) string {
	h := sha256.Sum256([]byte(db + "\x00" + table + "\x00" + question))
	return hex.EncodeToString(h[:])
}

// Link asks about every block of info and returns the reduced information
// (only related tables, only their related columns, family hints kept), the
// answers, and what it cost. When no table is related, info is returned
// unchanged.
func (l *Linker) Link(ctx context.Context, info *Info, q LinkQuestion) (*Info, []LinkAnswer, cost.Cost, error) {
	parallel := l.Parallel
	if parallel <= 0 {
		parallel = 8
	}
	answers := make([]LinkAnswer, len(info.Blocks))
	costs := make([]cost.Cost, len(info.Blocks))
	errs := make([]error, len(info.Blocks))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range info.Blocks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			answers[i], costs[i], errs[i] = l.linkOne(ctx, info, i, q)
		}()
	}
	wg.Wait()
	var total cost.Cost
	for _, c := range costs {
		total.Add(c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, answers, total, err
	}
	return reduce(info, answers), answers, total, nil
}

func (l *Linker) linkOne(ctx context.Context, info *Info, i int, q LinkQuestion) (LinkAnswer, cost.Cost, error) {
	var c cost.Cost
	bl, idx := info.Blocks[i], int64(i)
	key := cacheKey(info.Database, bl.FullName, q.Question)
	if l.Cache != nil {
		if a, ok, err := l.Cache.Get(ctx, key); err == nil && ok {
			c.CacheHits++
			return a, c, nil
		}
	}
	attempts := l.Attempts
	if attempts <= 0 {
		attempts = 3
	}
	// The block as the prompt shows it, after the oversize rules (the
	// reference asked about the chunks of prompts.txt).
	block := info.BlockText(i)
	temp := 0.0
	if l.Temperature != nil {
		temp = *l.Temperature
	}
	msgs := []llm.Message{llm.User(LinkPrompt(block, q.Question, q.ExternalKnowledge))}
	ans := LinkAnswer{Table: bl.FullName}
	var lastErr error
	for a := 0; a < attempts; a++ {
		seed := q.Seed*1_000_003 + idx*31 + int64(a)
		resp, err := l.LLM.Chat(ctx, llm.Request{Role: llm.RoleLink, Messages: msgs, Seed: &seed, Temperature: &temp})
		if err != nil {
			var ce *llm.CallError
			if errors.As(err, &ce) {
				c.Call(ce.Usage, true)
			}
			if ctx.Err() != nil {
				return ans, c, ctx.Err()
			}
			lastErr = err
			continue
		}
		c.Call(resp.Usage, false)
		parsed, perr := parseLink(resp.Text)
		if perr == nil {
			parsed.Table = bl.FullName
			if l.Cache != nil {
				_ = l.Cache.Put(ctx, key, parsed)
			}
			return parsed, c, nil
		}
		lastErr = perr
		// The reference crashed building this retry (string + exception);
		// here the model is told what was wrong, in the same conversation.
		msgs = append(msgs, llm.Assistant(resp.Text), llm.User(fmt.Sprintf(
			"Your answer could not be used: %v. Please answer only in ```json``` format with the keys think, answer (Y or N only) and columns.", perr)))
	}
	ans.Related, ans.Failed = true, true
	if lastErr != nil {
		ans.Error = lastErr.Error()
	}
	return ans, c, nil
}

// parseLink reads the linking answer leniently (pkg/reply): the last
// ```json block or JSON in prose, Python literals and trailing commas
// repaired, "yes"/"no" or a boolean for Y/N.
func parseLink(text string) (LinkAnswer, error) {
	f, err := reply.JSON(text)
	if err != nil {
		return LinkAnswer{}, err
	}
	var raw struct {
		Think   string
		Answer  string
		Columns []any
	}
	raw.Think, _ = f.String("think")
	raw.Answer, _ = f.String("answer")
	if cols, ok := f["columns"].([]any); ok {
		raw.Columns = cols
	}
	switch strings.ToLower(strings.TrimSpace(raw.Answer)) {
	case "yes", "true":
		raw.Answer = "Y"
	case "no", "false":
		raw.Answer = "N"
	}
	a := LinkAnswer{Think: raw.Think}
	switch strings.ToUpper(strings.TrimSpace(raw.Answer)) {
	case "Y":
		a.Related = true
	case "N":
	default:
		return LinkAnswer{}, fmt.Errorf("answer is %q, not Y or N", raw.Answer)
	}
	for _, c := range raw.Columns {
		if s, ok := c.(string); ok && strings.TrimSpace(s) != "" {
			a.Columns = append(a.Columns, strings.TrimSpace(s))
		}
	}
	return a, nil
}

// reduce keeps the related blocks and, in each, the related columns
// (matched exactly, ignoring case and quotes; a nested path keeps its
// top-level column). A block whose answer names no known column keeps all.
func reduce(info *Info, answers []LinkAnswer) *Info {
	out := &Info{Database: info.Database, Dialect: info.Dialect, opt: info.opt, Linked: true}
	for i, bl := range info.Blocks {
		a := answers[i]
		if !a.Related {
			continue
		}
		nb := *bl
		nb.keep = nil
		if !a.Failed && len(a.Columns) > 0 {
			known := map[string]bool{}
			for _, c := range bl.Columns {
				known[strings.ToLower(c.Name)] = true
			}
			keep := map[string]bool{}
			for _, c := range a.Columns {
				name := strings.ToLower(strings.Trim(c, "\"`' "))
				if i := strings.IndexByte(name, '.'); i > 0 && !known[name] {
					name = name[:i]
				}
				if known[name] {
					keep[name] = true
				}
			}
			if len(keep) > 0 {
				nb.keep = keep
			}
		}
		out.Blocks = append(out.Blocks, &nb)
	}
	if len(out.Blocks) == 0 {
		return info
	}
	out.render()
	return out
}
