package compare

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText writes d for a terminal: what changed, the cost of each side,
// and a line per example that changed (every example with all).
func (d *Diff) WriteText(w io.Writer, all bool) error {
	b, o := d.BaseTotals, d.OtherTotals
	var sb strings.Builder
	fmt.Fprintf(&sb, "base:  %s\nother: %s\n", d.Base, d.Other)
	for _, warn := range d.Warnings {
		fmt.Fprintf(&sb, "warning: %s\n", warn)
	}
	fmt.Fprintf(&sb, "examples: %d in both", d.Common)
	if len(d.OnlyBase)+len(d.OnlyOther) > 0 {
		fmt.Fprintf(&sb, ", %d in the base only %s, %d in the other only %s", len(d.OnlyBase), ids(d.OnlyBase), len(d.OnlyOther), ids(d.OnlyOther))
	}
	sb.WriteString(" (the figures below are over the examples in both)\n")
	fmt.Fprintf(&sb, "answers: %d of %d changed (status or result table); %d more with other SQL and the same result\n", d.Changed, d.Common, d.SQLOnly)
	be, bok := b.EX()
	oe, ook := o.EX()
	if bok || ook {
		fmt.Fprintf(&sb, "gold: right→wrong %d, wrong→right %d; EX %s → %s", d.RightWrong, d.WrongRight, pct(be, bok, b), pct(oe, ook, o))
		if bok && ook {
			fmt.Fprintf(&sb, " (%+.1f points)", 100*(oe-be))
		}
		sb.WriteString("\n")
	} else {
		sb.WriteString("gold: neither run was scored (no gold in its dataset)\n")
	}
	if _, err := io.WriteString(w, sb.String()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tbase\tother\tratio")
	fmt.Fprintf(tw, "answered\t%d\t%d\t\n", b.Answered, o.Answered)
	fmt.Fprintf(tw, "LLM calls\t%d\t%d\t%s\n", b.LLMCalls, o.LLMCalls, ratio(float64(o.LLMCalls), float64(b.LLMCalls)))
	fmt.Fprintf(tw, "prompt tokens\t%d\t%d\t%s\n", b.PromptTokens, o.PromptTokens, ratio(float64(o.PromptTokens), float64(b.PromptTokens)))
	fmt.Fprintf(tw, "completion tokens\t%d\t%d\t%s\n", b.CompletionTokens, o.CompletionTokens, ratio(float64(o.CompletionTokens), float64(b.CompletionTokens)))
	fmt.Fprintf(tw, "money\t%.4f\t%.4f\t%s\n", b.Money, o.Money, ratio(o.Money, b.Money))
	fmt.Fprintf(tw, "latency p50 (s)\t%.1f\t%.1f\t%s\n", b.LatencyP50, o.LatencyP50, ratio(o.LatencyP50, b.LatencyP50))
	fmt.Fprintf(tw, "latency p95 (s)\t%.1f\t%.1f\t%s\n", b.LatencyP95, o.LatencyP95, ratio(o.LatencyP95, b.LatencyP95))
	if err := tw.Flush(); err != nil {
		return err
	}
	rows := d.Differing()
	if all {
		rows = d.Rows
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no example's answer, SQL or judgement changed")
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "example\tbase\tother\tcalls\ttokens\tlatency (s)\tchanged")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d→%d\t%d→%d\t%.1f→%.1f\t%s\n", r.ID, outcome(r.Base), outcome(r.Other),
			r.Base.LLMCalls, r.Other.LLMCalls, r.Base.PromptTokens+r.Base.CompletionTokens, r.Other.PromptTokens+r.Other.CompletionTokens,
			r.Base.LatencySeconds, r.Other.LatencySeconds, r.what())
	}
	return tw.Flush()
}

// outcome is a side's status, with its confidence and gold's judgement.
func outcome(s *Side) string {
	out := s.Status
	if s.Confidence != "" {
		out += "/" + s.Confidence
	}
	if s.Correct != nil {
		if *s.Correct {
			out += " right"
		} else {
			out += " wrong"
		}
	}
	return out
}

func pct(ex float64, ok bool, t Totals) string {
	if !ok {
		return "unscored"
	}
	return fmt.Sprintf("%.1f%% (%d/%d)", 100*ex, t.Correct, t.Scored)
}

func ratio(x, base float64) string {
	if base == 0 {
		return "—"
	}
	return fmt.Sprintf("×%.2f", x/base)
}

// ids lists a few ids, in brackets.
func ids(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	if len(xs) > 5 {
		return "[" + strings.Join(xs[:5], " ") + fmt.Sprintf(" … %d more]", len(xs)-5)
	}
	return "[" + strings.Join(xs, " ") + "]"
}
