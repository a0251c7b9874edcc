package cluster

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/service"
)

// watcher notices a role that ended by itself (its consumer could not be
// created, say): it logs why and closes failed, which ends Wait. It
// watches from Start until Stop, the first component Close stops.
type watcher struct {
	c       *Cluster
	failed  chan struct{}
	failure error
	service.Loop
}

func (w *watcher) Start(ctx context.Context) error {
	w.failed = make(chan struct{})
	return w.Go(ctx, w.run)
}

func (w *watcher) run(ctx context.Context) error {
	w.c.mu.Lock()
	roles := append([]role(nil), w.c.roles...)
	w.c.mu.Unlock()
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}}
	for _, r := range roles {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(r.c.Done())})
	}
	i, _, _ := reflect.Select(cases)
	if i == 0 {
		return nil
	}
	r := roles[i-1]
	err := r.c.Err()
	if err == nil {
		err = errors.New("stopped")
	}
	w.failure = fmt.Errorf("%s: %w", r.name, err)
	w.c.log.Error("role stopped", zap.String("role", r.name), zap.Error(err))
	close(w.failed)
	return nil
}
