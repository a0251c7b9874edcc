package worker

import "testing"

// TestPredecessor: only a lease owned under this process's name by another
// incarnation is a dead predecessor's; another name, this incarnation, an
// owner without an incarnation (an older version's), or a process without
// one, never.
func TestPredecessor(t *testing.T) {
	for _, tc := range []struct {
		owner, name, incarnation string
		want                     bool
	}{
		{"generator-pod-1#a1b2", "generator-pod-1", "c3d4", true},
		{"generator-pod-1#c3d4", "generator-pod-1", "c3d4", false}, // this process: another delivery of its own
		{"generator-pod-2#a1b2", "generator-pod-1", "c3d4", false}, // another process
		{"generator-pod-1", "generator-pod-1", "c3d4", false},      // no incarnation: not known dead
		{"generator-pod-1#", "generator-pod-1", "c3d4", false},
		{"generator-pod-1#a1b2", "generator-pod-1", "", false}, // this process takes nothing over
		{"gen#x#a1b2", "gen#x", "c3d4", true},                  // a name with '#': the last one splits
		{"", "generator-pod-1", "c3d4", false},
	} {
		if got := predecessor(tc.owner, tc.name, tc.incarnation); got != tc.want {
			t.Errorf("predecessor(%q, name %q, incarnation %q) = %v, want %v", tc.owner, tc.name, tc.incarnation, got, tc.want)
		}
	}
}
