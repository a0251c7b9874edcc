package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Kind is one kind of task as an agent registered it: its name, the pool
// its tasks run on and what it does. Register declares it with its
// payload type and handler.
type Kind struct {
	Name string
	Pool Pool
	Doc  string
	// run decodes a task's payload and calls the handler.
	run func(ctx context.Context, ag Agent, c *Context, t Task) (*Outcome, error)
}

// Kinds is an agent's task kinds (Definition.Kinds), in the order
// registered. The zero value is empty and ready for Register.
type Kinds struct {
	list []Kind
	errs []error
}

// Register declares the task kind name on pool: its tasks' payloads are
// of type P, and handle runs them with the agent the run built (of type
// A, the agent's own). The runtime decodes each task's payload into a P
// and calls handle (Definition.Execute): the agent neither decodes nor
// dispatches, as River ties a job kind to its args type and its worker
// once (AddWorker[T]). A handler is often a method expression:
//
//	agent.Register(&def.Kinds, "generate", agent.Generator, "one candidate", (*myAgent).generate)
//
// with func (a *myAgent) generate(ctx context.Context, c *agent.Context,
// t agent.Task, p genPayload) (*agent.Outcome, error). A task without a
// payload gets P's zero value; one whose payload does not decode as a P
// fails at once (Permanent). P = json.RawMessage takes the payload as it
// is (a composite agent handing its members their tasks). A second kind
// of one name, or a pool other than Generator or Explorer, is a
// programming error that NewRegistry reports.
func Register[A Agent, P any](k *Kinds, name string, pool Pool, doc string,
	handle func(a A, ctx context.Context, c *Context, t Task, p P) (*Outcome, error)) {
	if pool != Generator && pool != Explorer {
		k.errs = append(k.errs, fmt.Errorf("task kind %s has no pool (generate or explore)", name))
		return
	}
	if _, dup := k.Lookup(name); dup {
		k.errs = append(k.errs, fmt.Errorf("task kind %s registered twice", name))
		return
	}
	k.list = append(k.list, Kind{Name: name, Pool: pool, Doc: doc, run: func(ctx context.Context, ag Agent, c *Context, t Task) (*Outcome, error) {
		a, ok := ag.(A)
		if !ok {
			return nil, Permanent(fmt.Errorf("task kind %s is for agents of type %T, not %T", name, *new(A), ag))
		}
		var p P
		if len(t.Payload) > 0 {
			if err := json.Unmarshal(t.Payload, &p); err != nil {
				return nil, Permanent(fmt.Errorf("task %s (%s): malformed payload: %w", t.ID, t.Kind, err))
			}
		}
		return handle(a, ctx, c, t, p)
	}})
}

// List returns the kinds in the order registered.
func (k *Kinds) List() []Kind { return append([]Kind(nil), k.list...) }

// Lookup returns the kind called name.
func (k *Kinds) Lookup(name string) (Kind, bool) {
	for _, kd := range k.list {
		if kd.Name == name {
			return kd, true
		}
	}
	return Kind{}, false
}

// Err is every registration error, joined.
func (k *Kinds) Err() error { return errors.Join(k.errs...) }

// Execute runs one task of ag, the agent d built, with its kind's handler
// (in a worker of the kind's pool, or in process). An error asks for a
// redelivery unless it is Permanent; a kind d does not declare is.
func (d *Definition) Execute(ctx context.Context, ag Agent, c *Context, t Task) (*Outcome, error) {
	k, ok := d.Kinds.Lookup(t.Kind)
	if !ok || k.run == nil {
		return nil, Permanent(fmt.Errorf("agent %s has no task kind %q", d.Name, t.Kind))
	}
	out, err := k.run(ctx, ag, c, t)
	if err == nil && out == nil {
		out = &Outcome{}
	}
	return out, err
}
