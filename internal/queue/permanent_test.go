package queue_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/quorumsql/quorum/internal/queue"
)

func TestIsPermanent(t *testing.T) {
	t.Parallel()
	cause := errors.New("unknown example")
	if p := fmt.Errorf("task t: %w", queue.Permanent(cause)); !queue.IsPermanent(p) || !errors.Is(p, cause) {
		t.Errorf("a wrapped permanent error: %v", p)
	}
	if queue.IsPermanent(cause) || queue.IsPermanent(nil) {
		t.Error("an unmarked error is permanent")
	}
}
