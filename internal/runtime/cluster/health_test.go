package cluster

import (
	"testing"
	"time"
)

func TestDeploymentHealthSummary(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	h := NewDeploymentHealth()
	h.now = func() time.Time { return now }
	steps := []struct {
		name string
		do   func()
		want string
	}{
		{"nothing heard", func() {}, ""},
		{"one cooled down", func() { h.Set("east", "gpt-4o", 30*time.Second) }, "1 deployment cooldown, down now: east/gpt-4o (30s)"},
		{"two down", func() { now = now.Add(10 * time.Second); h.Set("west", "gpt-4o", 30*time.Second) },
			"2 deployment cooldowns, down now: east/gpt-4o (20s), west/gpt-4o (30s)"},
		{"one back", func() { h.Set("east", "gpt-4o", 0) }, "2 deployment cooldowns, down now: west/gpt-4o (30s)"},
		{"the other's cooldown over", func() { now = now.Add(time.Minute) }, "2 deployment cooldowns"},
	}
	for _, s := range steps {
		s.do()
		if got := h.Summary(); got != s.want {
			t.Errorf("%s: summary %q, want %q", s.name, got, s.want)
		}
	}
}
