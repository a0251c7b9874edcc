package serve

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// HTTPLimits bound what a client can hold of a serve process: slow or idle
// connections and open event streams. Zero fields take the defaults.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers (default 10s).
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds reading a request's body, from the end of its
	// headers (default 30s): a slow body is cut with 408.
	BodyTimeout time.Duration
	// WriteTimeout bounds writing a response other than an event stream
	// (default 60s).
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long (default
	// 2m).
	IdleTimeout time.Duration
	// StreamWriteTimeout bounds each write of an event stream (default
	// 30s): a client that stopped reading is dropped once its buffers are
	// full instead of holding the stream forever.
	StreamWriteTimeout time.Duration
	// MaxStreams and MaxStreamsPerTenant cap the event streams open in this
	// process, in all and per tenant (defaults 1000 and 20); beyond them a
	// stream is refused with 429.
	MaxStreams, MaxStreamsPerTenant int
}

func (l *HTTPLimits) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeaderTimeout, 10*time.Second)
	def(&l.BodyTimeout, 30*time.Second)
	def(&l.WriteTimeout, time.Minute)
	def(&l.IdleTimeout, 2*time.Minute)
	def(&l.StreamWriteTimeout, 30*time.Second)
	if l.MaxStreams <= 0 {
		l.MaxStreams = 1000
	}
	if l.MaxStreamsPerTenant <= 0 {
		l.MaxStreamsPerTenant = 20
	}
}

// boundBody reads a request's body within BodyTimeout (and MaxBodyBytes)
// before the handler runs, then lifts the read deadline: a long handler,
// or a stream, is not cut by it.
func (s *Server) boundBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		timed := rc.SetReadDeadline(time.Now().Add(s.cfg.HTTP.BodyTimeout)) == nil
		b, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			writeJSON(w, http.StatusRequestTimeout, apiError{Error: fmt.Sprintf("the body did not arrive within %s", s.cfg.HTTP.BodyTimeout)})
			return
		case err != nil:
			writeJSON(w, http.StatusBadRequest, apiError{Error: "reading the body: " + err.Error()})
			return
		case len(b) > MaxBodyBytes:
			// The deadline stays: the rest is not waited for.
			w.Header().Set("Connection", "close")
			writeJSON(w, http.StatusRequestEntityTooLarge, apiError{Error: fmt.Sprintf("the body is over %d bytes", MaxBodyBytes)})
			return
		}
		if timed {
			_ = rc.SetReadDeadline(time.Time{})
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		h.ServeHTTP(w, r)
	})
}

// streams counts the open event streams of this process.
type streams struct {
	mu       sync.Mutex
	total    int
	byTenant map[string]int
}

// open takes a stream slot for tenant; "" and a release function, or the
// cap that refused it ("tenant" or "total").
func (st *streams) open(tenant string, l HTTPLimits) (string, func()) {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.byTenant[tenant] >= l.MaxStreamsPerTenant:
		return "tenant", nil
	case st.total >= l.MaxStreams:
		return "total", nil
	}
	if st.byTenant == nil {
		st.byTenant = map[string]int{}
	}
	st.total++
	st.byTenant[tenant]++
	var once sync.Once
	return "", func() {
		once.Do(func() {
			st.mu.Lock()
			defer st.mu.Unlock()
			st.total--
			if st.byTenant[tenant]--; st.byTenant[tenant] <= 0 {
				delete(st.byTenant, tenant) // no entry per tenant ever seen
			}
		})
	}
}

// streamRetry is the Retry-After of a refused stream: streams end with
// their question, so slots come back within seconds to minutes.
const streamRetry = 5 * time.Second

func refuseStream(w http.ResponseWriter, which string, l HTTPLimits) {
	w.Header().Set("Retry-After", strconv.Itoa(int(streamRetry/time.Second)))
	msg := fmt.Sprintf("this tenant has %d event streams open, the most allowed; close one or poll GET /v1/questions/{id}", l.MaxStreamsPerTenant)
	if which == "total" {
		msg = fmt.Sprintf("this server has %d event streams open, the most allowed; retry later or poll GET /v1/questions/{id}", l.MaxStreams)
	}
	writeJSON(w, http.StatusTooManyRequests, apiError{Error: msg})
}
