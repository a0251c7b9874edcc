package dataset

import "testing"

func TestFingerprint(t *testing.T) {
	ds := &Dataset{Examples: []*Example{
		{ID: "a", DB: "shop", Dialect: "sqlite", Question: "How many?"},
		{ID: "b", DB: "shop", Dialect: "sqlite", Question: "Which?"},
	}}
	base := ds.Fingerprint([]string{"a", "b"})
	if got := ds.Fingerprint([]string{"b", "a"}); got != base {
		t.Errorf("the ids in another order: %s, want %s", got, base)
	}
	if len(base) != 16 {
		t.Errorf("fingerprint %q, want 16 hex digits", base)
	}
	other := &Dataset{Examples: []*Example{
		{ID: "a", DB: "shop", Dialect: "sqlite", Question: "How many?"},
		{ID: "b", DB: "shop", Dialect: "sqlite", Question: "Which one?"},
	}}
	for name, fp := range map[string]string{
		"a question changed": other.Fingerprint([]string{"a", "b"}),
		"one example fewer":  ds.Fingerprint([]string{"a"}),
		"an id it lacks":     ds.Fingerprint([]string{"a", "b", "c"}),
	} {
		if fp == base {
			t.Errorf("%s: the same fingerprint %s", name, fp)
		}
	}
}
