package agent

import (
	"testing"
)

// TestRunOptions: a run's votes fill the votes option of an agent that
// declares it, its own or a member's, unless the options set it; an agent
// without one is untouched.
func TestRunOptions(t *testing.T) {
	t.Parallel()
	counted := &Definition{Name: "c", Options: []Option{{Name: OptVotes, Default: "8"}, {Name: "x", Default: "1"}}}
	composite := &Definition{Name: "e", Options: []Option{{Name: "c." + OptVotes, Default: "8"}, {Name: "p.passes", Default: "4"}}}
	other := &Definition{Name: "p", Options: []Option{{Name: "passes", Default: "4"}}}
	for _, tc := range []struct {
		def   *Definition
		opts  map[string]string
		votes int
		want  map[string]string
	}{
		{counted, nil, 3, map[string]string{OptVotes: "3", "x": "1"}},
		{counted, map[string]string{OptVotes: "5"}, 3, map[string]string{OptVotes: "5", "x": "1"}},
		{counted, nil, 0, map[string]string{OptVotes: "8", "x": "1"}},
		{composite, nil, 2, map[string]string{"c.votes": "2", "p.passes": "4"}},
		{other, nil, 3, map[string]string{"passes": "4"}},
	} {
		got, err := tc.def.RunOptions(tc.opts, tc.votes)
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%s %v votes %d: %v, %v; want %v", tc.def.Name, tc.opts, tc.votes, got, err, tc.want)
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s %v votes %d: %v; want %v", tc.def.Name, tc.opts, tc.votes, got, tc.want)
			}
		}
	}
	if !counted.TakesVotes() || composite.TakesVotes() || other.TakesVotes() {
		t.Error("only an agent declaring votes itself takes the run's count")
	}
	if _, err := other.RunOptions(map[string]string{OptVotes: "3"}, 3); err == nil {
		t.Error("an undeclared votes option was accepted")
	}
}

// TestLoadOf: an agent's declared load, or one task of one call.
func TestLoadOf(t *testing.T) {
	t.Parallel()
	d := &Definition{Name: "d"}
	if l := d.LoadOf(nil); l != (Load{Width: 1, Calls: 1}) {
		t.Errorf("undeclared load %+v", l)
	}
	d.Load = func(opts map[string]string) Load { return Load{Width: len(opts), Calls: 3} }
	if l := d.LoadOf(map[string]string{"a": "1", "b": "2"}); l != (Load{Width: 2, Calls: 3}) {
		t.Errorf("declared load %+v", l)
	}
}

func TestSeedDerivation(t *testing.T) {
	t.Parallel()
	a := Seed(1, "ex", 0, 3, "gen-0-0")
	if a != Seed(1, "ex", 0, 3, "gen-0-0") || a < 0 {
		t.Error("Seed must be deterministic and non-negative")
	}
	for _, b := range []int64{Seed(2, "ex", 0, 3, "gen-0-0"), Seed(1, "ex2", 0, 3, "gen-0-0"), Seed(1, "ex", 1, 3, "gen-0-0"), Seed(1, "ex", 0, 4, "gen-0-0"), Seed(1, "ex", 0, 3, "gen-1-0")} {
		if a == b {
			t.Error("Seed must change with each input")
		}
	}
}
