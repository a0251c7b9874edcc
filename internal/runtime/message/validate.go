package message

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/quorumsql/quorum/internal/blob"
	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/pkg/dataset"
)

// Anyone who can publish to the work streams can hand a worker or the
// voter a message, so every message is checked before it is acted on:
// the names it carries become Redis keys, blob paths and subjects. A
// message that fails is terminated, never redelivered.

// maxTaskID bounds task ids and kinds, which become Redis keys.
const maxTaskID = 256

// ids checks the names every message carries.
func ids(run, example, agentName string) error {
	if err := queue.CheckToken("run", run); err != nil {
		return err
	}
	if err := dataset.CheckName(example); err != nil {
		return fmt.Errorf("example %q: %w", example, err)
	}
	if err := queue.CheckToken("agent", agentName); err != nil {
		return err
	}
	return nil
}

// checkKey refuses empty, oversized or control-character task ids and
// kinds.
func checkKey(what, s string) error {
	if s == "" || len(s) > maxTaskID || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) {
		return fmt.Errorf("%s %.60q: want 1 to %d bytes without spaces or control characters", what, s, maxTaskID)
	}
	return nil
}

// Validate checks a task message before a worker acts on it.
func (t *Task) Validate() error {
	if err := ids(t.Run, t.Example, t.Agent); err != nil {
		return fmt.Errorf("invalid task: %w", err)
	}
	if t.Warehouse != "" {
		if err := queue.CheckToken("warehouse", t.Warehouse); err != nil {
			return fmt.Errorf("invalid task: %w", err)
		}
	}
	for _, c := range []struct{ what, s string }{{"task id", t.Task.ID}, {"task kind", t.Task.Kind}} {
		if err := checkKey(c.what, c.s); err != nil {
			return fmt.Errorf("invalid task: %w", err)
		}
	}
	if t.Task.Round < 0 || t.Generation < 0 {
		return errors.New("invalid task: negative round or generation")
	}
	if j := t.Task.Join; j != nil {
		if err := checkKey("join group", j.Group); err != nil {
			return fmt.Errorf("invalid task: %w", err)
		}
		if j.Of < 1 || j.Part < 0 || j.Part >= j.Of {
			return fmt.Errorf("invalid task: join part %d of %d", j.Part, j.Of)
		}
	}
	// A parent is run again on the task's word: it must be of the same
	// example and agent, and valid itself.
	for p, depth := t.Parent, 1; p != nil; p, depth = p.Parent, depth+1 {
		if depth > MaxAncestors {
			return fmt.Errorf("invalid task: more than %d parents", MaxAncestors)
		}
		if p.Run != t.Run || p.Example != t.Example || p.Agent != t.Agent {
			return fmt.Errorf("invalid task: its parent %.60q is of %s/%s/%s, not the task's own example and agent", p.Task.ID, p.Run, p.Example, p.Agent)
		}
		head := *p
		head.Parent = nil
		if err := head.Validate(); err != nil {
			return fmt.Errorf("parent: %w", err)
		}
	}
	return nil
}

// Validate checks a candidate result before the voter records it.
func (r *CandidateResult) Validate() error {
	if err := ids(r.Run, r.Example, r.Agent); err != nil {
		return fmt.Errorf("invalid result: %w", err)
	}
	if r.Round < 0 || r.Index < 0 || r.Rows < 0 {
		return errors.New("invalid result: negative round, index or rows")
	}
	// Agents record statuses of their own (ReFoRCE's vote task records
	// "vote"): any short lowercase word.
	if r.Status == "" || len(r.Status) > 32 || strings.Trim(r.Status, "abcdefghijklmnopqrstuvwxyz_") != "" {
		return fmt.Errorf("invalid result: status %.40q", r.Status)
	}
	if r.CSVRef != "" {
		if err := blob.CheckRef(r.CSVRef); err != nil {
			return fmt.Errorf("invalid result: %w", err)
		}
	}
	return nil
}

var finalStatuses = map[string]bool{"answered": true, "no_answer": true, "failed": true}

// Validate checks a final answer before the coordinator writes it.
func (f *FinalAnswer) Validate() error {
	if err := queue.CheckToken("run", f.Run); err != nil {
		return fmt.Errorf("invalid final answer: %w", err)
	}
	if err := dataset.CheckName(f.Example); err != nil {
		return fmt.Errorf("invalid final answer: example %q: %w", f.Example, err)
	}
	if !finalStatuses[f.Status] {
		return fmt.Errorf("invalid final answer: status %.40q", f.Status)
	}
	refs := append([]string{f.CSVRef}, f.CandidateRefs...)
	for _, c := range f.CandidateSQL {
		if c.Round < 0 || c.Index < 0 {
			// They name the candidate's output files.
			return fmt.Errorf("invalid final answer: candidate with a negative round or index (%d, %d)", c.Round, c.Index)
		}
		refs = append(refs, c.CSVRef)
	}
	for _, ref := range refs {
		if ref == "" {
			continue
		}
		if err := blob.CheckRef(ref); err != nil {
			return fmt.Errorf("invalid final answer: %w", err)
		}
	}
	return nil
}
