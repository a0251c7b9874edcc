package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// seamAgent records what its handlers were handed.
type seamAgent struct{ got []string }

func (*seamAgent) Start(context.Context, *agent.Context) (*agent.Dispatch, error) {
	return &agent.Dispatch{}, nil
}

func (*seamAgent) Decide(context.Context, *agent.Context, int, []*agent.Candidate) (*agent.Decision, error) {
	return &agent.Decision{}, nil
}

type probe struct {
	SQL  string `json:"sql"`
	Rows int    `json:"rows,omitempty"`
}

var errFlaky = errors.New("warehouse busy")

// seamDef declares one kind of each payload shape: a struct, a pointer,
// the raw payload, none, and one whose handler fails.
func seamDef() *agent.Definition {
	d := &agent.Definition{Name: "seam"}
	agent.Register(&d.Kinds, "probe", agent.Explorer, "a struct payload", func(a *seamAgent, _ context.Context, _ *agent.Context, t agent.Task, p probe) (*agent.Outcome, error) {
		a.got = append(a.got, fmt.Sprintf("%s %+v", t.ID, p))
		return &agent.Outcome{Results: []agent.Result{{Index: t.Slots[0], SQL: p.SQL, Status: agent.StatusOK, Rows: p.Rows}}}, nil
	})
	agent.Register(&d.Kinds, "pointer", agent.Generator, "a pointer payload", func(a *seamAgent, _ context.Context, _ *agent.Context, t agent.Task, p *probe) (*agent.Outcome, error) {
		a.got = append(a.got, fmt.Sprintf("%s nil=%v", t.ID, p == nil))
		return nil, nil
	})
	agent.Register(&d.Kinds, "raw", agent.Generator, "the payload as it is", func(a *seamAgent, _ context.Context, _ *agent.Context, t agent.Task, p json.RawMessage) (*agent.Outcome, error) {
		a.got = append(a.got, fmt.Sprintf("%s %s", t.ID, p))
		return &agent.Outcome{Part: p}, nil
	})
	agent.Register(&d.Kinds, "flaky", agent.Explorer, "fails, for another delivery", func(*seamAgent, context.Context, *agent.Context, agent.Task, struct{}) (*agent.Outcome, error) {
		return nil, fmt.Errorf("probing: %w", errFlaky)
	})
	return d
}

// TestExecuteDecodesAndDispatches: each task reaches its kind's handler
// with its payload decoded into the kind's type (a missing payload as the
// type's zero value, json.RawMessage as sent); a handler's error is
// passed on as it is, so the runtime delivers the task again; what
// cannot work on any delivery is permanent.
func TestExecuteDecodesAndDispatches(t *testing.T) {
	t.Parallel()
	d := seamDef()
	if _, err := agent.NewRegistry(d); err != nil {
		t.Fatal(err)
	}
	task := func(kind, id string, payload any) agent.Task {
		tk, err := agent.NewTask(kind, id, 0, []int{4}, payload)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	for _, tc := range []struct {
		name      string
		task      agent.Task
		got       string // what the handler was handed; "" when it was not called
		err       error  // wrapped by the error, when one is wanted
		permanent bool
		errText   string
	}{
		{"struct payload", task("probe", "p1", probe{SQL: "SELECT 1", Rows: 2}), "p1 {SQL:SELECT 1 Rows:2}", nil, false, ""},
		{"no payload: the zero value", task("probe", "p2", nil), "p2 {SQL: Rows:0}", nil, false, ""},
		{"unknown fields are ignored", agent.Task{Kind: "probe", ID: "p3", Slots: []int{4}, Payload: []byte(`{"sql":"SELECT 2","extra":true}`)},
			"p3 {SQL:SELECT 2 Rows:0}", nil, false, ""},
		{"pointer payload, none sent", task("pointer", "q1", nil), "q1 nil=true", nil, false, ""},
		{"pointer payload", task("pointer", "q2", probe{SQL: "x"}), "q2 nil=false", nil, false, ""},
		{"raw payload", task("raw", "r1", map[string]int{"part": 3}), `r1 {"part":3}`, nil, false, ""},
		{"a handler's error asks for another delivery", task("flaky", "f1", nil), "", errFlaky, false, "probing: warehouse busy"},
		{"malformed payload", agent.Task{Kind: "probe", ID: "p4", Payload: []byte(`{"sql": 7}`)}, "", nil, true, "task p4 (probe): malformed payload"},
		{"payload that is not JSON", agent.Task{Kind: "probe", ID: "p5", Payload: []byte(`SELECT`)}, "", nil, true, "malformed payload"},
		{"undeclared kind", task("nosuch", "n1", nil), "", nil, true, `agent seam has no task kind "nosuch"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &seamAgent{}
			out, err := d.Execute(context.Background(), a, &agent.Context{}, tc.task)
			if got := strings.Join(a.got, "; "); got != tc.got {
				t.Errorf("the handler was handed %q, want %q", got, tc.got)
			}
			if tc.errText == "" {
				if err != nil || out == nil {
					t.Fatalf("outcome %v, %v; want an outcome (never nil)", out, err)
				}
				return
			}
			if err == nil || agent.IsPermanent(err) != tc.permanent || !strings.Contains(err.Error(), tc.errText) || (tc.err != nil && !errors.Is(err, tc.err)) {
				t.Errorf("error %v (permanent %v); want %q, permanent %v", err, agent.IsPermanent(err), tc.errText, tc.permanent)
			}
		})
	}
	// The raw payload comes back as the join part it was sent as.
	out, err := d.Execute(context.Background(), &seamAgent{}, &agent.Context{}, task("raw", "r2", []int{1, 2}))
	if err != nil || string(out.Part) != "[1,2]" {
		t.Errorf("raw part %s, %v", out.Part, err)
	}
}

// TestRegisterRefusesMistakes: a kind on no pool, or registered twice, is
// reported by the registry, every mistake at once, and the kinds that
// were right are kept in order.
func TestRegisterRefusesMistakes(t *testing.T) {
	t.Parallel()
	noop := func(*seamAgent, context.Context, *agent.Context, agent.Task, struct{}) (*agent.Outcome, error) {
		return nil, nil
	}
	for _, tc := range []struct {
		name  string
		kinds func(k *agent.Kinds)
		want  []string // parts of the registry's error; nil for none
		list  []string
	}{
		{"fine", func(k *agent.Kinds) {
			agent.Register(k, "a", agent.Generator, "", noop)
			agent.Register(k, "b", agent.Explorer, "", noop)
		}, nil, []string{"a", "b"}},
		{"no pool", func(k *agent.Kinds) { agent.Register(k, "a", "", "", noop) }, []string{"task kind a has no pool (generate or explore)"}, nil},
		{"an unknown pool", func(k *agent.Kinds) { agent.Register(k, "a", agent.Pool("gpu"), "", noop) }, []string{"task kind a has no pool"}, nil},
		{"twice, and a third mistake", func(k *agent.Kinds) {
			agent.Register(k, "a", agent.Generator, "", noop)
			agent.Register(k, "a", agent.Explorer, "", noop)
			agent.Register(k, "c", "", "", noop)
		}, []string{"task kind a registered twice", "task kind c has no pool"}, []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &agent.Definition{Name: "k"}
			tc.kinds(&d.Kinds)
			var names []string
			for _, k := range d.Kinds.List() {
				names = append(names, k.Name)
			}
			if !slices.Equal(names, tc.list) {
				t.Errorf("kinds %v, want %v", names, tc.list)
			}
			_, err := agent.NewRegistry(d)
			if (err == nil) != (tc.want == nil) {
				t.Fatalf("registry: %v, want an error with %q", err, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), "agent k: ") || !strings.Contains(err.Error(), w) {
					t.Errorf("registry: %v, want %q", err, w)
				}
			}
		})
	}
}

// TestRegistry: the first agent registered is the default; a name twice
// is refused; an unknown name is answered with the names there are,
// sorted.
func TestRegistry(t *testing.T) {
	t.Parallel()
	def := func(name string) *agent.Definition { return &agent.Definition{Name: name} }
	r, err := agent.NewRegistry(def("zeta"), def("alpha"), def("mid"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Default() != "zeta" || !slices.Equal(r.Names(), []string{"alpha", "mid", "zeta"}) {
		t.Errorf("default %q, names %v", r.Default(), r.Names())
	}
	if d, err := r.Lookup("mid"); err != nil || d.Name != "mid" {
		t.Errorf("Lookup(mid): %v, %v", d, err)
	}
	if _, err := r.Lookup("nosuch"); err == nil || err.Error() != `unknown agent "nosuch": the agents are alpha, mid, zeta` {
		t.Errorf("Lookup(nosuch): %v", err)
	}
	if _, err := agent.NewRegistry(def("a"), def("b"), def("a")); err == nil || !strings.Contains(err.Error(), "agent a registered twice") {
		t.Errorf("a duplicate: %v", err)
	}
	var none *agent.Registry
	if none.Default() != "" {
		t.Error("a nil registry has a default")
	}
	if empty, err := agent.NewRegistry(); err != nil || empty.Default() != "" || len(empty.Names()) != 0 {
		t.Errorf("an empty registry: %v, %v", empty, err)
	}
}

// TestOptions: CheckOptions fills in every default and refuses an
// undeclared option naming the declared ones; the readers turn values
// into fields, collecting every bad one.
func TestOptions(t *testing.T) {
	t.Parallel()
	d := &agent.Definition{Name: "opt", Options: []agent.Option{{Name: "n", Default: "3"}, {Name: "on", Default: "false"}, {Name: "free"}}}
	got, err := d.CheckOptions(map[string]string{"on": "true"})
	if err != nil || len(got) != 3 || got["n"] != "3" || got["on"] != "true" || got["free"] != "" {
		t.Errorf("checked %v, %v", got, err)
	}
	if _, err := d.CheckOptions(map[string]string{"nn": "1"}); err == nil || err.Error() != `agent opt has no option "nn" (its options: n, on, free)` {
		t.Errorf("an undeclared option: %v", err)
	}
	for _, tc := range []struct {
		opts  map[string]string
		n     int
		on    bool
		wants []string // parts of the error; nil for none
	}{
		{map[string]string{}, 9, false, nil},
		{map[string]string{"n": "4", "on": "1"}, 4, true, nil},
		{map[string]string{"n": "0"}, 9, false, []string{"opt option n=0: use 1 or more"}},
		{map[string]string{"n": "four", "on": "maybe"}, 9, false, []string{`option n="four": want an integer`, `option on="maybe": want true or false`}},
	} {
		r := agent.OptionReader{Agent: "opt", Opts: tc.opts}
		n, on := 9, false
		r.Int("n", &n, 1)
		r.Bool("on", &on)
		err := r.Err()
		if n != tc.n || on != tc.on || (err == nil) != (tc.wants == nil) {
			t.Errorf("%v: n=%d on=%v (%v); want %d, %v", tc.opts, n, on, err, tc.n, tc.on)
		}
		for _, w := range tc.wants {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v, want %q", tc.opts, err, w)
			}
		}
	}
	if v, err := agent.OptionInt(map[string]string{}, "n"); v != 0 || err != nil {
		t.Errorf("an unset int: %d, %v", v, err)
	}
	if v, err := agent.OptionBool(map[string]string{"b": ""}, "b"); v || err != nil {
		t.Errorf("an empty bool: %v, %v", v, err)
	}
}

// TestErrorMarks: Permanent and Unrunnable survive wrapping and keep
// their cause; neither is mistaken for the other.
func TestErrorMarks(t *testing.T) {
	t.Parallel()
	cause := errors.New("no warehouse")
	p := fmt.Errorf("task t1: %w", agent.Permanent(cause))
	u := fmt.Errorf("example e1: %w", agent.Unrunnable(cause))
	if !agent.IsPermanent(p) || agent.IsUnrunnable(p) || !errors.Is(p, cause) || p.Error() != "task t1: no warehouse" {
		t.Errorf("permanent: %v", p)
	}
	if !agent.IsUnrunnable(u) || agent.IsPermanent(u) || !errors.Is(u, cause) {
		t.Errorf("unrunnable: %v", u)
	}
	if agent.IsPermanent(cause) || agent.IsUnrunnable(nil) {
		t.Error("an unmarked error is marked")
	}
}

// TestNewTask: a payload is sent as JSON, none is none, and one that
// cannot be encoded is an error naming the task; Range counts slots.
func TestNewTask(t *testing.T) {
	t.Parallel()
	tk, err := agent.NewTask("probe", "p", 1, agent.Range(3, 2), probe{SQL: "SELECT 1"})
	if err != nil || string(tk.Payload) != `{"sql":"SELECT 1"}` || tk.Round != 1 || !slices.Equal(tk.Slots, []int{3, 4}) {
		t.Errorf("task %+v, %v", tk, err)
	}
	if tk, err := agent.NewTask("probe", "p", 0, nil, nil); err != nil || tk.Payload != nil {
		t.Errorf("no payload: %+v, %v", tk, err)
	}
	if _, err := agent.NewTask("probe", "bad", 0, nil, make(chan int)); err == nil || !strings.Contains(err.Error(), "task bad payload") {
		t.Errorf("an unencodable payload: %v", err)
	}
	if r := agent.Range(0, 0); len(r) != 0 {
		t.Errorf("Range(0, 0) = %v", r)
	}
}
