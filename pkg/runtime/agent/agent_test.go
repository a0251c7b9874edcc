package agent

import (
	"context"
	"errors"
	"strings"
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

// TestLoadOf: an agent's declared load, or one task of one call; a depth
// left unset is the calls per task at the widest.
func TestLoadOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		load func(map[string]string) Load
		want Load
	}{
		{"undeclared", nil, Load{Width: 1, Calls: 1, Depth: 1}},
		{"no depth", func(opts map[string]string) Load { return Load{Width: len(opts), Calls: 7} }, Load{Width: 2, Calls: 7, Depth: 3}},
		{"depth", func(map[string]string) Load { return Load{Width: 2, Calls: 7, Depth: 5} }, Load{Width: 2, Calls: 7, Depth: 5}},
		{"no calls", func(map[string]string) Load { return Load{Width: 2} }, Load{Width: 1, Calls: 1, Depth: 1}},
	} {
		d := &Definition{Name: "d", Load: tc.load}
		if got := d.LoadOf(map[string]string{"a": "1", "b": "2"}); got != tc.want {
			t.Errorf("%s: load %+v, want %+v", tc.name, got, tc.want)
		}
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

type kindsAgent struct{ seen []string }

func (*kindsAgent) Start(context.Context, *Context) (*Dispatch, error) { return &Dispatch{}, nil }
func (*kindsAgent) Decide(context.Context, *Context, int, []*Candidate) (*Decision, error) {
	return &Decision{}, nil
}

type otherAgent struct{ kindsAgent }

type genPayload struct {
	Ref string `json:"ref"`
}

func (a *kindsAgent) generate(_ context.Context, _ *Context, t Task, p genPayload) (*Outcome, error) {
	a.seen = append(a.seen, t.ID+":"+p.Ref)
	return &Outcome{Results: []Result{{Index: t.Slots[0], SQL: p.Ref, Status: StatusOK}}}, nil
}

// TestRegisteredKinds: the runtime decodes a task's payload into its
// kind's type and calls the kind's handler; a malformed payload, an
// undeclared kind or another agent's instance fails for good, and a kind
// without a pool or registered twice fails the registry.
func TestRegisteredKinds(t *testing.T) {
	t.Parallel()
	d := &Definition{Name: "k"}
	Register(&d.Kinds, "generate", Generator, "one candidate", (*kindsAgent).generate)
	Register(&d.Kinds, "noop", Explorer, "", func(*kindsAgent, context.Context, *Context, Task, struct{}) (*Outcome, error) { return nil, nil })
	if _, err := NewRegistry(d); err != nil {
		t.Fatal(err)
	}
	if k, ok := d.Kind("generate"); !ok || k.Pool != Generator || k.Doc != "one candidate" || len(d.Kinds.List()) != 2 {
		t.Errorf("kinds %+v", d.Kinds.List())
	}
	a := &kindsAgent{}
	task, err := NewTask("generate", "g1", 0, []int{3}, genPayload{Ref: "blob"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Execute(context.Background(), a, &Context{}, task)
	if err != nil || len(out.Results) != 1 || out.Results[0].SQL != "blob" || len(a.seen) != 1 || a.seen[0] != "g1:blob" {
		t.Errorf("outcome %+v, %v, seen %v", out, err, a.seen)
	}
	if out, err := d.Execute(context.Background(), a, &Context{}, Task{Kind: "noop", ID: "n"}); err != nil || out == nil {
		t.Errorf("a handler's nil outcome: %v, %v", out, err)
	}
	for _, tc := range []struct {
		name string
		ag   Agent
		task Task
		want string
	}{
		{"malformed payload", a, Task{Kind: "generate", ID: "g2", Payload: []byte(`{"ref":1}`)}, "malformed payload"},
		{"undeclared kind", a, Task{Kind: "nosuch", ID: "x"}, `agent k has no task kind "nosuch"`},
		{"another agent", &otherAgent{}, task, "is for agents of type"},
	} {
		_, err := d.Execute(context.Background(), tc.ag, &Context{}, tc.task)
		if err == nil || !IsPermanent(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a permanent error with %q", tc.name, err, tc.want)
		}
	}

	bad := &Definition{Name: "bad"}
	Register(&bad.Kinds, "x", Pool("gpu"), "", (*kindsAgent).generate)
	Register(&bad.Kinds, "y", Generator, "", (*kindsAgent).generate)
	Register(&bad.Kinds, "y", Explorer, "", (*kindsAgent).generate)
	_, err = NewRegistry(bad)
	if err == nil || !strings.Contains(err.Error(), "task kind x has no pool") || !strings.Contains(err.Error(), "task kind y registered twice") {
		t.Errorf("registry: %v", err)
	}
}

// TestCheckAsked: a question sets only the options its agent lets askers
// set, each within its bound; the error names the option and the limit.
func TestCheckAsked(t *testing.T) {
	t.Parallel()
	d := &Definition{Name: "a", Options: []Option{
		{Name: OptVotes, Default: "8", Asker: AskCount()},
		{Name: "flag", Default: "false", Asker: AskBoolean()},
		{Name: "threshold", Default: "0.9", Asker: AskNumber(0.5, 0.999)},
		{Name: "mode", Default: "x", Asker: AskOneOf("x", "y")},
		{Name: "steps", Default: "10"}, // the operator's
	}}
	for _, tc := range []struct {
		opts         map[string]string
		option, want string // "" when accepted
	}{
		{nil, "", ""},
		{map[string]string{OptVotes: "32", "flag": "true", "threshold": "0.95", "mode": "y"}, "", ""},
		{map[string]string{OptVotes: "1"}, "", ""},
		{map[string]string{OptVotes: "100"}, OptVotes, "from 1 to 32"},
		{map[string]string{OptVotes: "0"}, OptVotes, "from 1 to 32"},
		{map[string]string{OptVotes: "9999999999999999999999"}, OptVotes, "from 1 to 32"},
		{map[string]string{OptVotes: "8.5"}, OptVotes, "integer"},
		{map[string]string{"flag": "yes please"}, "flag", "true or false"},
		{map[string]string{"threshold": "NaN"}, "threshold", "from 0.5 to 0.999"},
		{map[string]string{"threshold": "1"}, "threshold", "from 0.5 to 0.999"},
		{map[string]string{"mode": "z"}, "mode", "one of x, y"},
		{map[string]string{"steps": "1000000"}, "steps", "operator's"},
		{map[string]string{"colour": "red"}, "colour", "not an option of agent a"},
		// The first bad option in name order, whatever the map's order.
		{map[string]string{"mode": "z", OptVotes: "100", "flag": "true"}, "mode", "one of"},
	} {
		err := d.CheckAsked(tc.opts)
		var oe *OptionError
		switch {
		case tc.option == "" && err != nil:
			t.Errorf("%v: refused (%v), want accepted", tc.opts, err)
		case tc.option == "":
		case !errors.As(err, &oe) || oe.Option != tc.option || !strings.Contains(err.Error(), tc.want):
			t.Errorf("%v: %v, want an OptionError on %s saying %q", tc.opts, err, tc.option, tc.want)
		}
	}
	if got := strings.Join(d.AskerOptions(), ","); got != "votes,flag,threshold,mode" {
		t.Errorf("AskerOptions: %s, want votes,flag,threshold,mode", got)
	}
}
