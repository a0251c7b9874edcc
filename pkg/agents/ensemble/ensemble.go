// Package ensemble runs several agents on one example and combines their
// answers on one voter: no paper has it. Each member keeps its own task
// kinds, rounds and decision rule; the ensemble is a composite agent that
// namespaces the members' tasks, slots, stored values and costs, lets each
// member decide with its own rule, and, once every member has decided (or
// the round's deadline passed with what is in), combines the candidates
// each member's vote counted with the pooled rule (or one vote per
// member's winner).
package ensemble

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// Options of the ensemble itself; a member's option is set as
// MEMBER.OPTION (e.g. pexa.passes=2).
const (
	OptMembers = "members"
	OptWeights = "weights"
	OptRule    = "rule"
)

// Rules.
const (
	RulePooled  = "pooled"
	RuleWinners = "winners"
)

// prior is k in the pooled rule's c/(n+k): k phantom candidates that
// answered nothing, added to every member's pool (see pooled).
const prior = 2

// slotSpan separates the members' candidate indices: member i's slot s is
// i*slotSpan + s.
const slotSpan = 100_000

// Definition registers the ensemble over the given member definitions
// (their kinds and options are declared under the member's name).
func Definition(members ...*agent.Definition) *agent.Definition {
	d := &agent.Definition{
		Name: "ensemble",
		Doc:  "every member agent on every example, each deciding with its own rule; their candidates pooled, each member's vote split by its own pool's shares and shrunk when that pool is tiny (an agent's pool size buys no votes), high confidence when two agents agree",
		Options: []agent.Option{
			{Name: OptMembers, Default: names(members), Usage: "member agents, comma-separated"},
			{Name: OptWeights, Default: "", Usage: "member weights, NAME=W comma-separated (default 1 each)"},
			{Name: OptRule, Default: RulePooled, Usage: "pooled (the candidates each member voted over clustered; a cluster scores weight × count/(member's valid pool + 2) per member) or winners (one vote per member's answer)", Asker: agent.AskOneOf(RulePooled, RuleWinners)},
		},
	}
	for _, m := range members {
		// Each member kind under the member's name, handed to the member
		// as it is: the member's own kind decodes the payload.
		for _, k := range m.Kinds.List() {
			agent.Register(&d.Kinds, m.Name+"."+k.Name, k.Pool, m.Name+": "+k.Doc, (*ensemble).execute)
		}
		for _, o := range m.Options {
			d.Options = append(d.Options, agent.Option{Name: m.Name + "." + o.Name, Default: o.Default, Usage: m.Name + ": " + o.Usage, Asker: o.Asker})
		}
	}
	d.New = func(c agent.Config) (agent.Agent, error) { return newEnsemble(c, members) }
	// Every member runs on every example: their loads add up.
	d.Load = func(opts map[string]string) agent.Load {
		var total agent.Load
		for _, name := range strings.Split(opts[OptMembers], ",") {
			for _, m := range members {
				if m.Name != strings.TrimSpace(name) {
					continue
				}
				mo := map[string]string{}
				for k, v := range opts {
					if rest, ok := strings.CutPrefix(k, m.Name+"."); ok {
						mo[rest] = v
					}
				}
				l := m.LoadOf(mo)
				total.Width += l.Width
				total.Calls += l.Calls
				total.Depth = max(total.Depth, l.Depth) // the members run at once
			}
		}
		return total
	}
	return d
}

func names(defs []*agent.Definition) string {
	var out []string
	for _, d := range defs {
		out = append(out, d.Name)
	}
	return strings.Join(out, ",")
}

type member struct {
	name   string
	index  int
	weight float64
	def    *agent.Definition
	agent  agent.Agent
}

type ensemble struct {
	members []*member
	byName  map[string]*member
	rule    string
}

func newEnsemble(c agent.Config, defs []*agent.Definition) (*ensemble, error) {
	e := &ensemble{byName: map[string]*member{}, rule: c.Options[OptRule]}
	if e.rule != RulePooled && e.rule != RuleWinners {
		return nil, fmt.Errorf("ensemble option rule=%q: use pooled or winners", e.rule)
	}
	byDef := map[string]*agent.Definition{}
	for _, d := range defs {
		byDef[d.Name] = d
	}
	for i, name := range strings.Split(c.Options[OptMembers], ",") {
		name = strings.TrimSpace(name)
		def, ok := byDef[name]
		if !ok {
			return nil, fmt.Errorf("ensemble option members: %q is not an agent (the agents: %s)", name, names(defs))
		}
		if _, dup := e.byName[name]; dup {
			return nil, fmt.Errorf("ensemble option members: %s is listed twice", name)
		}
		opts := map[string]string{}
		for k, v := range c.Options {
			if rest, ok := strings.CutPrefix(k, name+"."); ok {
				opts[rest] = v
			}
		}
		ag, err := def.New(agent.Config{Options: opts, LLM: c.LLM, Cache: c.Cache, Log: c.Log})
		if err != nil {
			return nil, fmt.Errorf("ensemble member %s: %w", name, err)
		}
		m := &member{name: name, index: i, weight: 1, def: def, agent: ag}
		e.members = append(e.members, m)
		e.byName[name] = m
	}
	if len(e.members) == 0 {
		return nil, errors.New("ensemble option members: name at least one agent")
	}
	if w := strings.TrimSpace(c.Options[OptWeights]); w != "" {
		for _, kv := range strings.Split(w, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			m := e.byName[k]
			f, err := strconv.ParseFloat(v, 64)
			if !ok || m == nil || err != nil || f <= 0 {
				return nil, fmt.Errorf("ensemble option weights: %q: use MEMBER=WEIGHT with a member and a positive weight", kv)
			}
			m.weight = f
		}
	}
	return e, nil
}

// wrap puts a member's task in the ensemble's namespace.
func (m *member) wrap(t agent.Task) agent.Task {
	out := t
	out.Kind, out.ID = m.name+"."+t.Kind, m.name+"/"+t.ID
	out.Slots = make([]int, len(t.Slots))
	for i, s := range t.Slots {
		out.Slots[i] = m.index*slotSpan + s
	}
	if t.Join != nil {
		j := *t.Join
		j.Group, j.Then = m.name+"/"+j.Group, m.wrap(j.Then)
		out.Join = &j
	}
	return out
}

// unwrap is wrap's inverse.
func (e *ensemble) unwrap(t agent.Task) (*member, agent.Task, error) {
	name, kind, ok := strings.Cut(t.Kind, ".")
	m := e.byName[name]
	if !ok || m == nil {
		return nil, t, agent.Permanent(fmt.Errorf("ensemble: task kind %q names no member of this run", t.Kind))
	}
	out := t
	out.Kind, out.ID = kind, strings.TrimPrefix(t.ID, name+"/")
	out.Slots = make([]int, len(t.Slots))
	for i, s := range t.Slots {
		out.Slots[i] = s - m.index*slotSpan
	}
	if t.Join != nil {
		j := *t.Join
		_, then, err := e.unwrap(j.Then)
		if err != nil {
			return nil, t, err
		}
		j.Group, j.Then = strings.TrimPrefix(j.Group, name+"/"), then
		out.Join = &j
	}
	return m, out, nil
}

// context is the member's view: its own namespace in the store and a
// ledger of its own, merged into the task's under the member's name.
func (m *member) context(c *agent.Context) *agent.Context {
	mc := *c
	mc.Store = prefixed{c.Store, m.name + "/"}
	mc.Ledger = cost.Ledger{}
	mc.Log = c.Log.With(zap.String("member", m.name))
	return &mc
}

func (m *member) account(c, mc *agent.Context) {
	for stage, cst := range mc.Ledger {
		c.Ledger.Stage(m.name + "." + stage).Add(*cst)
	}
}

// Start starts every member. A member that cannot start is recorded as
// failed and the others go on; the example fails only when none starts.
func (e *ensemble) Start(ctx context.Context, c *agent.Context) (*agent.Dispatch, error) {
	out := &agent.Dispatch{Round: 0}
	var errs []error
	for _, m := range e.members {
		mc := m.context(c)
		d, err := m.agent.Start(ctx, mc)
		m.account(c, mc)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.name, err))
			if err := e.record(ctx, c, m, &memberState{Decided: true, Failed: err.Error()}); err != nil {
				return nil, err
			}
			continue
		}
		if d.Round != 0 {
			return nil, fmt.Errorf("ensemble member %s opened round %d, not 0", m.name, d.Round)
		}
		out.Expect += d.Expect
		for _, t := range d.Tasks {
			out.Tasks = append(out.Tasks, m.wrap(t))
		}
	}
	if len(errs) == len(e.members) {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// execute hands a task to its member, whose kind runs it.
func (e *ensemble) execute(ctx context.Context, c *agent.Context, t agent.Task, _ json.RawMessage) (*agent.Outcome, error) {
	m, inner, err := e.unwrap(t)
	if err != nil {
		return nil, err
	}
	mc := m.context(c)
	out, err := m.def.Execute(ctx, m.agent, mc, inner)
	m.account(c, mc)
	if err != nil || out == nil {
		return out, err
	}
	wrapped := &agent.Outcome{Part: out.Part}
	for _, r := range out.Results {
		r.Index += m.index * slotSpan
		wrapped.Results = append(wrapped.Results, r)
	}
	for _, n := range out.Next {
		wrapped.Next = append(wrapped.Next, m.wrap(n))
	}
	return wrapped, nil
}

// memberState is a member's standing, kept in the store between rounds.
type memberState struct {
	Decided bool   `json:"decided"`
	Failed  string `json:"failed,omitempty"`
	// Winner is the composite index of its answer (-1: none).
	Winner     int    `json:"winner"`
	Confidence string `json:"confidence,omitempty"`
	Method     string `json:"method,omitempty"`
	Valid      int    `json:"valid"`
	// Voted is the composite indices of the valid candidates the member's
	// vote counted; null (the member did not say) counts all of its
	// candidates, [] counts none.
	Voted []int `json:"voted"`
	// Sampling is the member's adaptive-sampling verdict (its own
	// policy, MEMBER.sampling); nil under fixed sampling.
	Sampling *agent.Sampling `json:"sampling,omitempty"`
}

func stateKey(m *member) string { return "ensemble/" + m.name }

func (e *ensemble) record(ctx context.Context, c *agent.Context, m *member, s *memberState) error {
	b, _ := json.Marshal(s)
	return c.Store.Set(ctx, stateKey(m), string(b))
}

func (e *ensemble) state(ctx context.Context, c *agent.Context, m *member) (*memberState, error) {
	v, ok, err := c.Store.Get(ctx, stateKey(m))
	if err != nil || !ok {
		return &memberState{Winner: -1}, err
	}
	var s memberState
	return &s, json.Unmarshal([]byte(v), &s)
}

// Decide lets every undecided member decide its round with its own rule;
// members that open another round get it (the ensemble's next round);
// when every member has decided, the ensemble's rule combines them.
func (e *ensemble) Decide(ctx context.Context, c *agent.Context, round int, cands []*agent.Candidate) (*agent.Decision, error) {
	own := map[*member][]*agent.Candidate{}
	origin := map[*agent.Candidate]*agent.Candidate{} // member view -> composite
	for _, cand := range cands {
		i := cand.Index / slotSpan
		if i < 0 || i >= len(e.members) {
			continue
		}
		m := e.members[i]
		mv := *cand
		mv.Index = cand.Index - m.index*slotSpan
		own[m] = append(own[m], &mv)
		origin[own[m][len(own[m])-1]] = cand
	}
	next := &agent.Dispatch{Round: round + 1}
	states := map[*member]*memberState{}
	for _, m := range e.members {
		st, err := e.state(ctx, c, m)
		if err != nil {
			return nil, err
		}
		states[m] = st
		if st.Decided {
			continue
		}
		mc := m.context(c)
		d, err := m.agent.Decide(ctx, mc, round, own[m])
		m.account(c, mc)
		if err != nil {
			return nil, fmt.Errorf("ensemble member %s: %w", m.name, err)
		}
		if d.Next != nil {
			if d.Next.Round != round+1 {
				return nil, fmt.Errorf("ensemble member %s opened round %d after round %d", m.name, d.Next.Round, round)
			}
			next.Expect += d.Next.Expect
			for _, t := range d.Next.Tasks {
				next.Tasks = append(next.Tasks, m.wrap(t))
			}
			continue
		}
		st = &memberState{Decided: true, Winner: -1, Confidence: d.Confidence, Method: d.Method, Valid: d.Valid, Sampling: d.Sampling}
		if d.Winner != nil {
			st.Winner = origin[d.Winner].Index
		}
		if d.Voted != nil {
			st.Voted = make([]int, len(d.Voted))
			for i, idx := range d.Voted {
				st.Voted[i] = m.index*slotSpan + idx
			}
		}
		if err := e.record(ctx, c, m, st); err != nil {
			return nil, err
		}
		states[m] = st
	}
	if len(next.Tasks) > 0 || next.Expect > 0 {
		return &agent.Decision{Next: next, Confidence: "low", Method: "ensemble_waiting"}, nil
	}
	return e.combine(c, cands, states), nil
}

// combine is the ensemble's decision over the candidates each member's own
// vote counted (after exploring, ReFoRCE's final vote counts the
// exploration round alone, so its first round weighs nothing here either).
func (e *ensemble) combine(c *agent.Context, all []*agent.Candidate, states map[*member]*memberState) *agent.Decision {
	byIndex := map[int]*agent.Candidate{}
	for _, cand := range all {
		byIndex[cand.Index] = cand
	}
	memberOf := func(cand *agent.Candidate) *member { return e.members[cand.Index/slotSpan] }
	cands := counted(all, states, memberOf)
	groups, _ := vote.Clusters(cands)
	// Each member's valid candidates, for the pooled shares.
	validOf := map[*member]int{}
	for _, g := range groups {
		for _, pos := range g {
			validOf[memberOf(cands[pos])]++
		}
	}
	d := &agent.Decision{Rule: e.rule, Confidence: "low", Voted: []int{}}
	for _, g := range groups {
		d.Valid += len(g)
		for _, pos := range g {
			d.Voted = append(d.Voted, cands[pos].Index)
		}
	}
	winnerGroup := -1
	if e.rule == RuleWinners {
		winnerGroup = e.winnersVote(groups, cands, states)
		d.Method = "ensemble_winners"
	}
	if winnerGroup < 0 {
		winnerGroup, d.Method = e.pooled(c, groups, cands, validOf, states)
	}
	if winnerGroup >= 0 {
		g := groups[winnerGroup]
		d.Winner = cands[g[0]]
		// A member's own winner in the cluster represents it, when there is one.
		for _, m := range e.members {
			if w := byIndex[states[m].Winner]; w != nil && inGroup(g, cands, w) {
				d.Winner = w
				break
			}
		}
		// High when two agents agree: the winning cluster holds counted
		// candidates of two members or more. The scores pick the answer;
		// agreement, however weakly weighted, is what makes it high.
		agents := map[*member]bool{}
		for _, pos := range g {
			d.Agreed = append(d.Agreed, cands[pos].Index)
			agents[memberOf(cands[pos])] = true
		}
		if len(agents) >= 2 {
			d.Confidence = "high"
		}
	}
	for _, m := range e.members {
		st := states[m]
		md := agent.Member{Agent: m.name, Confidence: st.Confidence, Method: st.Method, Valid: st.Valid, Winner: byIndex[st.Winner],
			Sampling: st.Sampling}
		if st.Failed != "" {
			md.Method = "failed: " + st.Failed
		}
		md.Agrees = md.Winner != nil && winnerGroup >= 0 && inGroup(groups[winnerGroup], cands, md.Winner)
		d.Members = append(d.Members, md)
	}
	return d
}

// counted keeps, of each member's candidates, those its vote counted (all
// of them when it did not say).
func counted(all []*agent.Candidate, states map[*member]*memberState, memberOf func(*agent.Candidate) *member) []*agent.Candidate {
	voted := map[int]bool{}
	for _, st := range states {
		for _, idx := range st.Voted {
			voted[idx] = true
		}
	}
	var out []*agent.Candidate
	for _, cand := range all {
		if st := states[memberOf(cand)]; st == nil || st.Voted == nil || voted[cand.Index] {
			out = append(out, cand)
		}
	}
	return out
}

func inGroup(g []int, cands []*agent.Candidate, c *agent.Candidate) bool {
	for _, pos := range g {
		if cands[pos] == c {
			return true
		}
	}
	return false
}

// pooled scores each cluster by Σ over members of weight × c/(n+k): c of
// the member's n valid counted candidates are in the cluster, k = prior.
// That is the member's share c/n times n/(n+k), a confidence that grows
// with the pool: a pool size buys no votes (a member's total stays under
// its weight), but a lone surviving candidate is one answer seen once and
// counts a third (n=1), a unanimous 8 count 0.8 and 12 of 32 count 0.35.
// c/(n+k) is additive smoothing, as if k more candidates had answered
// nothing: linear in c, so a member's votes still add up across clusters
// (a Wilson lower bound would not). k=2 is the smallest whole prior under
// which a strict majority of any other member's pool of two or more
// (c/(n+2) > 1/3) outweighs a lone candidate; at k=1, 2 of 3 only ties it.
// The unique best wins; a tie goes to the cluster holding the answer of the
// heaviest member among the tied, then to a seeded choice.
func (e *ensemble) pooled(c *agent.Context, groups [][]int, cands []*agent.Candidate, validOf map[*member]int, states map[*member]*memberState) (int, string) {
	if len(groups) == 0 {
		return -1, "ensemble_none"
	}
	scores := make([]float64, len(groups))
	for i, g := range groups {
		for _, pos := range g {
			m := e.members[cands[pos].Index/slotSpan]
			scores[i] += m.weight / float64(validOf[m]+prior)
		}
	}
	best := 0.0
	for _, s := range scores {
		best = max(best, s)
	}
	var tied []int
	for i, s := range scores {
		if s >= best-1e-9 {
			tied = append(tied, i)
		}
	}
	if len(tied) == 1 {
		return tied[0], "ensemble_pooled"
	}
	heavy := append([]*member(nil), e.members...)
	sort.SliceStable(heavy, func(i, j int) bool { return heavy[i].weight > heavy[j].weight })
	for _, m := range heavy {
		w := states[m].Winner
		for _, gi := range tied {
			for _, pos := range groups[gi] {
				if cands[pos].Index == w {
					return gi, "ensemble_pooled_heaviest"
				}
			}
		}
	}
	seed := agent.Seed(c.Seed, c.Example.ID, 0, 0, "ensemble/tie")
	r := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	return tied[r.IntN(len(tied))], "ensemble_random_tie_break"
}

// winnersVote gives each member's answer one vote of its weight: answers
// that agree are one cluster; the unique heaviest cluster of two or more
// members wins, else -1 (the pooled rule decides).
func (e *ensemble) winnersVote(groups [][]int, cands []*agent.Candidate, states map[*member]*memberState) int {
	weight := make([]float64, len(groups))
	votes := make([]int, len(groups))
	for _, m := range e.members {
		w := states[m].Winner
		for gi, g := range groups {
			for _, pos := range g {
				if cands[pos].Index == w {
					weight[gi] += m.weight
					votes[gi]++
				}
			}
		}
	}
	best, bestW, unique := -1, 0.0, false
	for gi := range groups {
		switch {
		case weight[gi] > bestW:
			best, bestW, unique = gi, weight[gi], true
		case weight[gi] == bestW && bestW > 0:
			unique = false
		}
	}
	if best < 0 || !unique || votes[best] < 2 {
		return -1
	}
	return best
}

// prefixed is a member's namespace in the example's store.
type prefixed struct {
	s      agent.Store
	prefix string
}

func (p prefixed) Once(ctx context.Context, name string, fn func(context.Context) (string, error)) (string, error) {
	return p.s.Once(ctx, p.prefix+name, fn)
}
func (p prefixed) Get(ctx context.Context, name string) (string, bool, error) {
	return p.s.Get(ctx, p.prefix+name)
}
func (p prefixed) Set(ctx context.Context, name, value string) error {
	return p.s.Set(ctx, p.prefix+name, value)
}
func (p prefixed) PutBlob(ctx context.Context, b []byte) (string, error) { return p.s.PutBlob(ctx, b) }
func (p prefixed) GetBlob(ctx context.Context, ref string) ([]byte, error) {
	return p.s.GetBlob(ctx, ref)
}
func (p prefixed) Parts(ctx context.Context, group string) ([]agent.Part, error) {
	return p.s.Parts(ctx, p.prefix+group)
}
func (p prefixed) Checkpoint(ctx context.Context, name string) ([]byte, bool, error) {
	return p.s.Checkpoint(ctx, p.prefix+name)
}
func (p prefixed) SaveCheckpoint(ctx context.Context, name string, state []byte) error {
	return p.s.SaveCheckpoint(ctx, p.prefix+name, state)
}
func (p prefixed) DropCheckpoint(ctx context.Context, name string) error {
	return p.s.DropCheckpoint(ctx, p.prefix+name)
}
