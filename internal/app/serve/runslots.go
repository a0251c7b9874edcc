package serve

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Reruns' slots. A rerun holds one of the process's slots (s.runSlots,
// Config.MaxRuns) while its query runs, and with tenants configured one
// tenant may hold at most its share of them (half, at least 1): a tenant
// sending hostile SQL as fast as it is answered keeps at most half the
// slots busy, and another tenant's rerun still finds one (issue 50). A
// refusal's 429 names the cap that refused it.

// tenantShare is how many of slots one tenant may hold at once.
func tenantShare(slots int) int { return max(1, slots/2) }

// takeSeat takes one of tenant's seats (its share of the slots) for a
// rerun; false when the tenant holds its whole share.
func (s *Server) takeSeat(tenant string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reruns[tenant] >= tenantShare(cap(s.runSlots)) {
		return nil, false
	}
	s.reruns[tenant]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.reruns[tenant]--; s.reruns[tenant] <= 0 {
				delete(s.reruns, tenant) // no entry per tenant ever seen
			}
		})
	}, true
}

// holdRunSlot takes a seat of the request's tenant (when tenants are
// configured; none waits for one), then waits up to runWait for one of the
// process's slots. On refusal it has answered 429, or nothing when the
// client left; release gives back what was taken.
func (s *Server) holdRunSlot(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	seat := func() {}
	if s.cfg.Tenants != nil {
		tenant := tenantOf(r)
		if seat, ok = s.takeSeat(tenant); !ok {
			share := tenantShare(cap(s.runSlots))
			w.Header().Set("Retry-After", strconv.Itoa(int((s.runTimeout()+time.Second-1)/time.Second)))
			writeJSON(w, http.StatusTooManyRequests, apiError{Error: fmt.Sprintf(
				"tenant %s already runs %d reruns at once, the most one tenant may (half of this server's %d); retry when one ends",
				tenant, share, cap(s.runSlots))})
			return nil, false
		}
	}
	ctx := r.Context()
	wctx, stop := context.WithTimeout(ctx, runWait)
	defer stop()
	select {
	case s.runSlots <- struct{}{}:
		return func() { <-s.runSlots; seat() }, true
	case <-wctx.Done():
		seat()
		if ctx.Err() != nil {
			return nil, false // the client left
		}
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusTooManyRequests, apiError{Error: fmt.Sprintf(
			"this server runs %d reruns at once, the most it allows for all tenants together; retry later", cap(s.runSlots))})
		return nil, false
	}
}
