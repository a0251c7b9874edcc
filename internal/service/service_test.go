package service_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumsql/quorum/internal/service"
)

// TestLoop: Stop cancels the loop's context and returns once its goroutine
// has ended; a loop is not started twice at once, may be started again
// once stopped, and says when it ended by itself and why. In a synctest
// bubble: the loop's slow exit costs no real time.
func TestLoop(t *testing.T) {
	synctest.Test(t, testLoop)
}

func testLoop(t *testing.T) {
	var l service.Loop
	l.Stop() // not started: nothing to do
	var running atomic.Bool
	run := func(ctx context.Context) error {
		running.Store(true)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) //clock:ok in TestLoop's synctest bubble: a slow exit Stop must wait for
		running.Store(false)
		return nil
	}
	if err := l.Go(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	if err := l.Go(context.Background(), run); !errors.Is(err, service.ErrStarted) {
		t.Fatalf("second Go: %v", err)
	}
	l.Stop()
	if running.Load() {
		t.Fatal("Stop returned before the loop's goroutine ended")
	}
	l.Stop()

	boom := errors.New("boom")
	if err := l.Go(context.Background(), func(context.Context) error { return boom }); err != nil {
		t.Fatalf("Go after Stop: %v", err)
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the loop returned")
	}
	if !errors.Is(l.Err(), boom) {
		t.Fatalf("Err = %v", l.Err())
	}
	if err := l.Go(context.Background(), run); !errors.Is(err, service.ErrStarted) {
		t.Fatalf("Go on a loop that ended by itself but was not stopped: %v", err)
	}
	l.Stop()

	// The parent context ends the loop too.
	ctx, cancel := context.WithCancel(context.Background())
	if err := l.Go(ctx, run); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-l.Done()
	l.Stop()
}

type recorder struct {
	name  string
	log   *[]string
	start error
}

func (r *recorder) Start(context.Context) error {
	if r.start != nil {
		return r.start
	}
	*r.log = append(*r.log, "start "+r.name)
	return nil
}

func (r *recorder) Stop() { *r.log = append(*r.log, "stop "+r.name) }

// TestGroup: started in order, stopped in reverse; a failed start stops
// what was started.
func TestGroup(t *testing.T) {
	var log []string
	g := service.Group{&recorder{name: "a", log: &log}, &recorder{name: "b", log: &log}}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.Stop()
	if got := fmtLog(log); got != "start a, start b, stop b, stop a" {
		t.Fatalf("order: %s", got)
	}
	log = nil
	g = service.Group{&recorder{name: "a", log: &log}, &recorder{name: "b", log: &log, start: errors.New("no")}}
	if err := g.Start(context.Background()); err == nil {
		t.Fatal("a failed start was not reported")
	}
	if got := fmtLog(log); got != "start a, stop a" {
		t.Fatalf("after a failed start: %s", got)
	}
}

func fmtLog(log []string) string {
	out := ""
	for i, s := range log {
		if i > 0 {
			out += ", "
		}
		out += s
	}
	return out
}

// TestHTTP: the component serves from Start; Stop lets a request in flight
// finish, then returns once the server is down.
func TestHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The slow request answers only once the shutdown has begun: it is in
	// flight when Stop is called, whatever the machine's speed.
	inFlight, shutting := make(chan struct{}), make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(inFlight)
			<-shutting
		}
		_, _ = io.WriteString(w, "ok")
	})}
	srv.RegisterOnShutdown(func() { close(shutting) })
	h := &service.HTTP{Listener: ln, Server: srv}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	url := "http://" + h.Addr().String()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := make(chan error, 1)
	go func() {
		resp, err := client.Get(url + "/slow")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "ok" {
				err = errors.New("body " + string(b))
			}
		}
		got <- err
	}()
	<-inFlight
	h.Stop()
	if err := <-got; err != nil {
		t.Fatalf("the request in flight at Stop: %v", err)
	}
	if _, err := client.Get(url + "/"); err == nil {
		t.Fatal("still serving after Stop")
	}
	if err := h.Err(); err != nil {
		t.Fatalf("Err after Stop = %v", err)
	}
}
