package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Held calls each with every message the stream still holds on subject (a
// filter, wildcards allowed), oldest first: queued, delivered and not yet
// acknowledged, waiting for redelivery, or out of deliveries and not yet
// accounted for by the advisory reader. A work-queue stream deletes a
// message once it is acknowledged (or terminated), so this is exactly the
// work that may still happen. It reads one message per request
// (JetStream's next-by-subject get), so its cost is the number of messages
// held on subject.
func (q *Queue) Held(ctx context.Context, subject string, each func(subject string, data []byte)) error {
	for seq := uint64(1); ; {
		m, err := q.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("messages held on %s: %w", subject, err)
		}
		each(m.Subject, m.Data)
		seq = m.Sequence + 1
	}
}
