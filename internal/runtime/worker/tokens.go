package worker

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/pkg/llm"
)

// A run with a token cap (runstate.Manifest.MaxTokens: quorum serve caps a
// question at its token reservation) is stopped between two LLM calls,
// not when a task ends: its tasks' costs reach Redis only with their
// results, too late to stop anything. Each answered call's tokens are
// added to the run's count at once; the call that reaches the cap marks
// the run cancelled in the same step and stops its own task before the
// task can make another call, and every call of the run asks first
// whether the run was stopped (by another task's call, or a cancel), so
// none starts once it is. The run passes its cap by at most the calls in
// flight when it was reached.

// errTokenLimit stops the task whose call reached its run's token cap.
var errTokenLimit = errors.New("the run's LLM calls reached its token cap")

// errRunStopped stops a task about to call the LLM for a run stopped
// meanwhile (at its token cap, or cancelled).
var errRunStopped = errors.New("the run was stopped (its token cap reached, or cancelled)")

// meter is what counts a task's LLM calls; for a run with a token cap it
// also enforces the cap, stopping the task (stop) as said above.
func (w *worker) meter(ctx context.Context, run *runenv.Run, stop context.CancelCauseFunc) *llm.Meter {
	m := run.Manifest
	if m.MaxTokens <= 0 {
		return &llm.Meter{}
	}
	// The count must land even when the task's context ends as the call
	// returns: it is what stops the run's other tasks.
	count := context.WithoutCancel(ctx)
	return llm.NewMeter(llm.MeterHooks{
		Before: func(ctx context.Context) error {
			cancelled, err := w.env.State.Cancelled(ctx, m.Run)
			if err != nil || !cancelled {
				// Unread, the mark is left to the count after the call.
				return nil
			}
			stop(errRunStopped)
			return errRunStopped
		},
		After: func(u llm.Usage) {
			used, reached, err := w.env.State.SpendTokens(count, m.Run, int64(u.PromptTokens+u.CompletionTokens), m.MaxTokens)
			if err != nil {
				w.env.Log.Warn("counting a capped run's tokens", zap.String("run", m.Run), zap.Error(err))
				return
			}
			if reached {
				w.env.Log.Info("a run reached its token cap; stopping it", zap.String("run", m.Run),
					zap.Int64("used", used), zap.Int64("cap", m.MaxTokens))
				stop(errTokenLimit)
			}
		},
	})
}

// stoppedByMeter reports whether the meter stopped the task (cause: its
// context's).
func stoppedByMeter(cause error) bool {
	return errors.Is(cause, errTokenLimit) || errors.Is(cause, errRunStopped)
}

// dropReason is what the failed results of a task dropped because its run
// was cancelled say: the run's token cap, or the client's cancel.
func dropReason(cancelReason string) string {
	if runstate.StoppedForTokens(cancelReason) {
		return cancelReason
	}
	return "cancelled by the client"
}
