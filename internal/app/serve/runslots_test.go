package serve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTenantShare(t *testing.T) {
	for _, tt := range []struct{ slots, want int }{{1, 1}, {2, 1}, {3, 1}, {4, 2}, {5, 2}, {8, 4}} {
		if got := tenantShare(tt.slots); got != tt.want {
			t.Errorf("tenantShare(%d) = %d, want %d", tt.slots, got, tt.want)
		}
	}
}

// rerunRequest is a rerun request as tenant's.
func rerunRequest(tenant string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/questions/q1/run", nil)
	return r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant))
}

// TestOneTenantHoldsAtMostItsShare: with 4 rerun slots, tenant a gets 2
// and its third is refused at once with a 429 naming the tenant's cap,
// while tenant b still gets the other 2; a seat given back is taken
// again, and no count is left per tenant once all are; without tenants
// configured nothing is capped per tenant.
func TestOneTenantHoldsAtMostItsShare(t *testing.T) {
	s := &Server{cfg: Config{Tenants: &Tenants{}}, reruns: map[string]int{}, runSlots: make(chan struct{}, 4)}
	hold := func(tenant string) (func(), *httptest.ResponseRecorder) {
		w := httptest.NewRecorder()
		release, ok := s.holdRunSlot(w, rerunRequest(tenant))
		if !ok {
			return nil, w
		}
		return release, nil
	}
	a1, _ := hold("a")
	a2, _ := hold("a")
	if a1 == nil || a2 == nil {
		t.Fatal("tenant a's first two reruns were refused")
	}
	_, refused := hold("a")
	switch {
	case refused == nil:
		t.Fatal("tenant a's third rerun took a slot, want it refused: its share is 2 of 4")
	case refused.Code != http.StatusTooManyRequests || !strings.Contains(refused.Body.String(), "tenant a already runs 2 reruns") || refused.Header().Get("Retry-After") == "":
		t.Errorf("tenant a's third: %d %s (Retry-After %q), want 429 naming the tenant's cap", refused.Code, refused.Body, refused.Header().Get("Retry-After"))
	}
	b1, _ := hold("b")
	b2, _ := hold("b")
	if b1 == nil || b2 == nil {
		t.Fatal("tenant b was refused while a held only its share")
	}
	if len(s.runSlots) != 4 {
		t.Errorf("%d process slots held, want 4", len(s.runSlots))
	}
	a1()
	if again, _ := hold("a"); again == nil {
		t.Error("tenant a could not take back the seat it gave back")
	} else {
		again()
	}
	a2()
	b1()
	b2()
	if len(s.runSlots) != 0 || len(s.reruns) != 0 {
		t.Errorf("after every release: %d slots held, tenants' counts %v; want none", len(s.runSlots), s.reruns)
	}

	s.cfg.Tenants = nil
	var all []func()
	for range 4 {
		release, w := hold("")
		if release == nil {
			t.Fatalf("without tenants, a rerun was refused: %d %s", w.Code, w.Body)
		}
		all = append(all, release)
	}
	for _, release := range all {
		release()
	}
}
