package reforce

import (
	"context"
	"strings"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
)

// Format asks once per example for the expected answer format (v1's format
// restriction) and returns it as a one-line csv block shared by every
// candidate, or "" when the model gave none (the reference crashed).
func (a *Agent) Format(ctx context.Context, ex Example, seed int64) (string, cost.Cost, error) {
	var c cost.Cost
	s := &session{a: a, role: llm.RoleFormat, c: &c}
	text, err := s.ask(ctx, FormatPrompt(ex.Question), seed)
	if err != nil {
		if ctx.Err() != nil {
			return "", c, ctx.Err()
		}
		return "", c, nil
	}
	blocks := llm.Blocks(reply.Visible(text), "csv")
	if len(blocks) == 0 {
		return "", c, nil
	}
	header, _, _ := strings.Cut(strings.TrimSpace(blocks[0]), "\n")
	if header == "" {
		return "", c, nil
	}
	return "```csv\n" + header + "\n```", c, nil
}
