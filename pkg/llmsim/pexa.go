package llmsim

// PExA (spec pexa-raise.md §1.3–§1.8, §4.1 item 5, §4.2): the Planner, the
// Test Case Generator, the Proposer and the Semantic Verifier, each answered
// from the gold SQL with noise. Everything here is a pure function of the
// request (its messages and seed), like the other kinds.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"

	"github.com/quorumsql/quorum/pkg/llm"
)

// The PExA agent's tools (spec D-P2, §1.8.2, §1.8.5).
const (
	toolGenerateTestcase = "generate_testcase"
	toolProposeFinalSQL  = "propose_final_sql"
	toolFinish           = "finish"
	toolExecuteSQL       = "execute_sql"
	toolNotEnoughInfo    = "not_enough_information"
	toolSemanticVerifier = "semantic_verifier"
)

// PExA's reply shapes.
const (
	// maxProbes and minProbes bound a first probe batch (spec §4.2).
	maxProbes, minProbes = 7, 3
	// maxPlanBatches is how many generate_testcase calls a Planner makes at
	// most: the first batch and one more (PlanMore).
	maxPlanBatches = 2
	// maxProposals is how many times a Planner calls propose_final_sql at
	// most: the first proposal and two more after a failed one.
	maxProposals = 3
	// maxVerifyRevisions is how many Semantic Errors the Proposer revises
	// its SQL after; after that it answers with the SQL it has.
	maxVerifyRevisions = 2
	// exploreFirst is the probability that a Test Case Generator's batch
	// starts with an exploration query.
	exploreFirst = 0.2
)

// pexaMarkers are checked in this order; no marker appears in another's
// prompt (TestMarkersAreExclusive), so the order only matters for text that
// is not an agent's prompt.
var pexaMarkers = []string{MarkerPExAVerify, MarkerPExAPropose, MarkerPExATestcase, MarkerPExAPlan}

// pexaAgent returns the PExA marker a first user message carries, or "".
func pexaAgent(first string) string {
	for _, m := range pexaMarkers {
		if strings.Contains(first, m) {
			return m
		}
	}
	return ""
}

// convo is a conversation with its assistant tool calls indexed by id.
type convo struct {
	msgs  []llm.Message
	first int // the first user message
	calls map[string]llm.ToolCall
}

func newConvo(msgs []llm.Message, first int) convo {
	c := convo{msgs: msgs, first: first, calls: map[string]llm.ToolCall{}}
	for _, m := range msgs {
		if m.Role == "assistant" {
			for _, tc := range m.ToolCalls {
				c.calls[tc.ID] = tc
			}
		}
	}
	return c
}

// toolMsg is a tool result with the call it answers.
type toolMsg struct {
	name, content string
	call          llm.ToolCall
}

// toolName is the tool a tool message answers: found by its tool_call_id,
// else guessed from the result's shape.
func (c convo) toolName(m llm.Message) string {
	if tc, ok := c.calls[m.ToolCallID]; ok && m.ToolCallID != "" {
		return tc.Name
	}
	t := strings.TrimSpace(m.Content)
	switch {
	case strings.HasPrefix(t, "Probe 1:"):
		return toolGenerateTestcase
	case strings.HasPrefix(t, "Proposed SQL:"):
		return toolProposeFinalSQL
	case strings.HasPrefix(t, "Semantic check passed"), strings.HasPrefix(t, "Semantic Error"),
		strings.HasPrefix(t, "Semantic check could not be read"), strings.HasPrefix(t, "Semantic check not run"):
		return toolSemanticVerifier
	case strings.HasPrefix(t, "Query 1 ("):
		return toolExecuteSQL
	}
	return ""
}

func (c convo) toolMsg(m llm.Message) toolMsg {
	return toolMsg{name: c.toolName(m), content: m.Content, call: c.calls[m.ToolCallID]}
}

// lastToolGroup returns the last run of consecutive tool messages (the
// results of one assistant message's calls).
func (c convo) lastToolGroup() []toolMsg {
	end := -1
	for i := len(c.msgs) - 1; i > c.first; i-- {
		if c.msgs[i].Role == "tool" {
			end = i
			break
		}
	}
	if end < 0 {
		return nil
	}
	start := end
	for start-1 > c.first && c.msgs[start-1].Role == "tool" {
		start--
	}
	var out []toolMsg
	for _, m := range c.msgs[start : end+1] {
		out = append(out, c.toolMsg(m))
	}
	return out
}

// tail is the last message after the first user message that is not the
// model's own (assistant or system); false when there is none.
func (c convo) tail() (llm.Message, bool) {
	for i := len(c.msgs) - 1; i > c.first; i-- {
		if r := c.msgs[i].Role; r == "tool" || r == "user" {
			return c.msgs[i], true
		}
	}
	return llm.Message{}, false
}

// count is how many times the model called the tool.
func (c convo) count(name string) int {
	n := 0
	for _, m := range c.msgs {
		if m.Role == "assistant" {
			for _, tc := range m.ToolCalls {
				if tc.Name == name {
					n++
				}
			}
		}
	}
	return n
}

// results are the results of the tool's calls, in order.
func (c convo) results(name string) []toolMsg {
	var out []toolMsg
	for _, m := range c.msgs {
		if m.Role == "tool" {
			if tm := c.toolMsg(m); tm.name == name {
				out = append(out, tm)
			}
		}
	}
	return out
}

// text is the whole conversation's text, tool arguments included.
func (c convo) text() string {
	var b strings.Builder
	for _, m := range c.msgs {
		b.WriteString(m.Content)
		b.WriteByte('\n')
		for _, tc := range m.ToolCalls {
			b.WriteString(tc.Arguments)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func hasTool(group []toolMsg, name string) bool {
	for _, tm := range group {
		if tm.name == name {
			return true
		}
	}
	return false
}

// isExecError reports whether an executor feedback is an error.
func isExecError(s string) bool {
	return strings.Contains(s, "Compilation Error") || strings.Contains(s, "NULL Error")
}

// argSQL is a call's sql_query argument, "" when it has none. A
// persona's sql key reads as sql_query.
func argSQL(tc llm.ToolCall) string {
	var a map[string]any
	_ = json.Unmarshal([]byte(tc.Arguments), &a)
	return strings.TrimSpace(querySQL(a))
}

func querySQL(a map[string]any) string {
	for _, k := range []string{"sql_query", "sql"} {
		if s, ok := a[k].(string); ok {
			return s
		}
	}
	return ""
}

// batchQueries reads an execute_sql batch, in the personas' forms too (sql
// for sql_query, "false" for false).
func batchQueries(args string) []sqlQuery {
	var a struct {
		Queries []map[string]any `json:"queries"`
	}
	_ = json.Unmarshal([]byte(args), &a)
	out := make([]sqlQuery, 0, len(a.Queries))
	for _, q := range a.Queries {
		d, _ := q["description"].(string)
		ex := q["exploration"] == true || q["exploration"] == "true"
		mp := q["most_promising"] == true || q["most_promising"] == "true"
		out = append(out, sqlQuery{Description: d, SQL: querySQL(q), Exploration: ex, MostPromising: mp})
	}
	return out
}

// pexaCall is a reply's tool call before it gets an id.
type pexaCall struct {
	name string
	args any
}

// arguments renders the call's arguments as a model writes them: compact
// JSON, "<>" not "\u003c\u003e".
func (p pexaCall) arguments() string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p.args)
	return strings.TrimSuffix(b.String(), "\n")
}

// sqlQuery is one query of a Test Case Generator's execute_sql batch.
type sqlQuery struct {
	Description string `json:"description"`
	SQL         string `json:"sql_query"`
	Exploration bool   `json:"exploration"`
	// MostPromising is a choice of the final query made before the
	// results, set only when the tool's schema offers it (the agent
	// stopped offering it: it chooses after the results, its D-P24), so
	// requests that do not offer it are answered as before.
	MostPromising bool `json:"most_promising,omitempty"`
}

var noArgs = map[string]any{}

// pexaOptions are what a PExA request's prompt and tool schemas ask of
// the reply beyond its kind.
type pexaOptions struct {
	// promising: execute_sql offers most_promising; mark draws which
	// query gets it (a stream of its own, so the other draws stay).
	promising bool
	mark      *rand.Rand
	// sequential: the Planner plans one probe per turn (agent D-P22).
	sequential bool
}

// sequentialMarker is the guideline of the sequential Planner's prompt.
const sequentialMarker = "- Plan one probe at a time:"

// maxSequentialProbes bounds a sequential plan: each probe is a Planner
// turn and a tool run against its step budget, and a Planner that reads
// each result needs fewer.
const maxSequentialProbes = 4

// pexaOptionsFor reads a request's options.
func (s *Server) pexaOptionsFor(req chatRequest, c convo, all string) pexaOptions {
	var reqSeed uint64
	if req.Seed != nil {
		reqSeed = uint64(*req.Seed)
	}
	o := pexaOptions{mark: raiseRNG(s.cfg.Seed, reqSeed, "pexa_most_promising", all)}
	for _, t := range req.Tools {
		var schema struct {
			Properties map[string]struct {
				MaxItems *int `json:"maxItems"`
				Items    struct {
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"items"`
			} `json:"properties"`
		}
		_ = json.Unmarshal(t.Function.Parameters, &schema)
		switch t.Function.Name {
		case toolExecuteSQL:
			_, o.promising = schema.Properties["queries"].Items.Properties["most_promising"]
		case toolGenerateTestcase:
			if m := schema.Properties["probes"].MaxItems; m != nil && *m == 1 {
				o.sequential = true
			}
		}
	}
	if len(c.msgs) > c.first && strings.Contains(c.msgs[c.first].Content, sequentialMarker) {
		o.sequential = true
	}
	return o
}

// pexa answers a PExA request with a text or one tool call; offered tells
// whether the request offers a tool.
func (s *Server) pexa(rng *rand.Rand, kind Kind, info *exampleInfo, c convo, offered func(string) bool, o pexaOptions) (string, *pexaCall) {
	n := s.cfg.Noise
	first := c.msgs[c.first].Content
	switch kind {
	case KindPExAPlan:
		if o.sequential {
			return "", &pexaCall{toolGenerateTestcase, map[string]any{"probes": s.sequentialPlan(info, first)[:1]}}
		}
		return "", &pexaCall{toolGenerateTestcase, map[string]any{"probes": s.planProbes(rng, info)}}
	case KindPExAPlanAfterProbes:
		if o.sequential {
			if next := s.nextSequentialProbe(info, first, c.text()); next != "" {
				return "", &pexaCall{toolGenerateTestcase, map[string]any{"probes": []string{next}}}
			}
		} else if hasTool(c.lastToolGroup(), toolGenerateTestcase) && c.count(toolGenerateTestcase) < maxPlanBatches && rng.Float64() < n.PlanMore {
			if more := s.moreProbes(rng, info, c.text()); len(more) > 0 {
				return "", &pexaCall{toolGenerateTestcase, map[string]any{"probes": more}}
			}
		}
		if !offered(toolProposeFinalSQL) && offered(toolExecuteSQL) {
			// The no-proposer Planner (Table 2 "w/o proposer") writes the
			// final SQL itself, drawn as the Proposer's from its evidence:
			// the probes' results.
			return "", &pexaCall{toolExecuteSQL, map[string]any{"sql_query": s.proposeSQL(rng, info, c.probeResults())}}
		}
		return "", &pexaCall{toolProposeFinalSQL, noArgs}
	case KindPExAPlanAfterSQL:
		// As the Proposer after its execute_sql: a revision after an
		// error (the agent's finish guard included), else perhaps the
		// verifier, then finish with the SQL.
		var last toolMsg
		for _, tm := range c.lastToolGroup() {
			if tm.name == toolExecuteSQL || tm.name == toolFinish && argSQL(tm.call) != "" {
				last = tm
			}
		}
		sql := argSQL(last.call)
		switch {
		case last.name != "" && isExecError(last.content):
			return "", &pexaCall{toolExecuteSQL, map[string]any{"sql_query": s.revise(rng, info)}}
		case sql != "" && strings.HasPrefix(strings.TrimSpace(last.content), "Success"):
			if m, _ := c.tail(); m.Role == "tool" && offered(toolSemanticVerifier) && rng.Float64() < n.VerifyCall {
				return "", &pexaCall{toolSemanticVerifier, map[string]any{"sql_query": sql}}
			}
			return "", &pexaCall{toolFinish, map[string]any{"sql_query": sql}}
		}
		if sql = c.lastSuccessfulSQL(); sql != "" {
			return "", &pexaCall{toolFinish, map[string]any{"sql_query": sql}}
		}
		return "", &pexaCall{toolExecuteSQL, map[string]any{"sql_query": s.revise(rng, info)}}
	case KindPExAPlanAfterVerify:
		// As the Proposer after a verdict: finish on a passed check,
		// revise after a Semantic Error (at most maxVerifyRevisions).
		var v toolMsg
		for _, tm := range c.lastToolGroup() {
			if tm.name == toolSemanticVerifier {
				v = tm
			}
		}
		sql := argSQL(v.call)
		if sql == "" {
			sql = c.lastSuccessfulSQL()
		}
		if sql == "" || strings.HasPrefix(strings.TrimSpace(v.content), "Semantic Error") && c.semanticErrors() <= maxVerifyRevisions {
			return "", &pexaCall{toolExecuteSQL, map[string]any{"sql_query": s.revise(rng, info)}}
		}
		return "", &pexaCall{toolFinish, map[string]any{"sql_query": sql}}
	case KindPExAPlanAfterProposal:
		res := ""
		if rs := c.results(toolProposeFinalSQL); len(rs) > 0 {
			res = rs[len(rs)-1].content
		}
		if strings.Contains(res, "Execution: Success") && !strings.Contains(res, "Semantic Error") || c.count(toolProposeFinalSQL) >= maxProposals {
			return "", &pexaCall{toolFinish, noArgs}
		}
		return "", &pexaCall{toolProposeFinalSQL, noArgs}
	case KindPExATestcase:
		if rng.Float64() < n.NotEnoughInfo {
			return "", &pexaCall{toolNotEnoughInfo, map[string]any{"explanation": "The probe asks for data that none of the listed tables appears to hold, so it cannot be answered as stated."}}
		}
		pp := s.parseProbe(info, probeOf(first))
		batch := s.testcaseBatch(rng, info, pp)
		if o.promising {
			markPromising(o.mark, batch)
		}
		return "", &pexaCall{toolExecuteSQL, map[string]any{"queries": batch}}
	case KindPExAChooseFinal:
		pp := s.parseProbe(info, probeOf(first))
		return "", &pexaCall{toolChooseFinal, map[string]any{"query": chooseFinal(info, pp, c)}}
	case KindPExATestcaseFix:
		pp := s.parseProbe(info, probeOf(first))
		return "", &pexaCall{toolExecuteSQL, map[string]any{"queries": s.testcaseFix(info, pp, c, o.promising)}}
	case KindPExAPropose:
		return "", &pexaCall{toolExecuteSQL, map[string]any{"sql_query": s.proposeSQL(rng, info, first)}}
	case KindPExAProposeNext:
		m, _ := c.tail()
		sql := ""
		if m.Role == "tool" {
			sql = argSQL(c.calls[m.ToolCallID])
		}
		if sql == "" {
			sql = c.lastSuccessfulSQL()
		}
		if sql == "" {
			sql = s.sqlFor(rng, info, s.draw(rng, info))
		}
		if m.Role == "tool" && offered(toolSemanticVerifier) && rng.Float64() < n.VerifyCall {
			return "", &pexaCall{toolSemanticVerifier, map[string]any{"sql_query": sql}}
		}
		return finalSQL(sql), nil
	case KindPExAProposeAfterVerify:
		m, _ := c.tail()
		sql := argSQL(c.calls[m.ToolCallID])
		if sql == "" {
			sql = c.lastSuccessfulSQL()
		}
		if sql == "" || strings.HasPrefix(strings.TrimSpace(m.Content), "Semantic Error") && c.semanticErrors() <= maxVerifyRevisions {
			return "", &pexaCall{toolExecuteSQL, map[string]any{"sql_query": s.revise(rng, info)}}
		}
		return finalSQL(sql), nil
	case KindPExAProposeFix:
		return "", &pexaCall{toolExecuteSQL, map[string]any{"sql_query": s.revise(rng, info)}}
	case KindPExAVerify:
		return s.verify(rng, info, first), nil
	}
	return "", nil
}

// proposeSQL is a Proposer's SQL (or the no-proposer Planner's): the gold
// SQL's probability multiplied by ProposeBoost when the evidence names
// every gold table.
func (s *Server) proposeSQL(rng *rand.Rand, info *exampleInfo, evidence string) string {
	boost := 1.0
	if n := s.cfg.Noise; n.ProposeBoost > 0 && s.evidenceNamesGold(info, evidence) {
		boost = n.ProposeBoost
	}
	return s.sqlFor(rng, info, s.drawBoosted(rng, info, boost))
}

// semanticErrors is how many verdicts in the conversation were Semantic
// Errors.
func (c convo) semanticErrors() int {
	n := 0
	for _, r := range c.results(toolSemanticVerifier) {
		if strings.HasPrefix(strings.TrimSpace(r.content), "Semantic Error") {
			n++
		}
	}
	return n
}

// probeResults is a Planner's evidence: its generate_testcase results
// (each probe with its final SQL and result), without its prompt.
func (c convo) probeResults() string {
	var b strings.Builder
	for _, r := range c.results(toolGenerateTestcase) {
		b.WriteString(r.content)
		b.WriteByte('\n')
	}
	return b.String()
}

// hasSQLFinish reports whether a tool group answers a finish that carried
// a SQL: the no-proposer Planner's, refused by the agent's guard.
func hasSQLFinish(group []toolMsg) bool {
	for _, tm := range group {
		if tm.name == toolFinish && argSQL(tm.call) != "" {
			return true
		}
	}
	return false
}

// finalSQL is the Proposer's final answer.
func finalSQL(sql string) string {
	return sqlBlock("The probes and the checks support this query; here is the final SQL.", sql)
}

// revise is a revision after error feedback, as KindRefine answers: the
// gold SQL with the Fix probability, else a fresh draw.
func (s *Server) revise(rng *rand.Rand, info *exampleInfo) string {
	if rng.Float64() < s.cfg.Noise.Fix*min(1.2, info.skill) {
		return s.sqlFor(rng, info, outGold)
	}
	return s.sqlFor(rng, info, s.draw(rng, info))
}

// lastSuccessfulSQL is the last SQL the Proposer (or the no-proposer
// Planner) executed with Success.
func (c convo) lastSuccessfulSQL() string {
	sql := ""
	for _, r := range c.results(toolExecuteSQL) {
		if q := argSQL(r.call); q != "" && strings.HasPrefix(strings.TrimSpace(r.content), "Success") {
			sql = q
		}
	}
	return sql
}

// pexaTables are the tables a Planner explores: the gold ones, or with
// probability 1-ExploreRight one or two random ones (their first columns).
func (s *Server) pexaTables(rng *rand.Rand, info *exampleInfo) []*tableInfo {
	tables := s.know.goldTables(info)
	if len(tables) > 0 && rng.Float64() < s.cfg.Noise.ExploreRight {
		return tables
	}
	all := s.know.tables(info.ex)
	var out []*tableInfo
	for i := 0; i < 2 && len(all) > 0; i++ {
		t := all[rng.IntN(len(all))]
		if i == 1 && out[0].name == t.name {
			break
		}
		out = append(out, &tableInfo{name: t.name, ref: t.ref, columns: t.columns[:min(3, len(t.columns))]})
	}
	return out
}

// tag marks a probe with its example, so that the Test Case Generator's
// request, which carries only the probe, can be answered (spec §4.1 item 5).
func tag(info *exampleInfo, probe string) string {
	return probe + " [llmsim:" + info.ex.ID + "]"
}

// planProbes is a Planner's first batch: a table probe per table, then the
// distinct values of up to 2 columns of each, padded with sample-row and
// row-count probes to at least 3, and at most 7.
func (s *Server) planProbes(rng *rand.Rand, info *exampleInfo) []string {
	tables := s.pexaTables(rng, info)
	var probes []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] && len(probes) < maxProbes {
			seen[p] = true
			probes = append(probes, p)
		}
	}
	for _, t := range tables {
		if len(t.columns) == 0 {
			add("Retrieve a few sample rows from " + t.name)
			continue
		}
		add("Retrieve a table of " + strings.Join(t.columns[:min(5, len(t.columns))], ", ") + " from " + t.name)
	}
	for j := 0; j < 2; j++ {
		for _, t := range tables {
			if j < len(t.columns) {
				add("Retrieve the distinct values of " + t.columns[j] + " in " + t.name)
			}
		}
	}
	for _, t := range tables {
		if len(probes) < minProbes {
			add("Retrieve a few sample rows from " + t.name)
		}
	}
	for _, t := range tables {
		if len(probes) < minProbes {
			add("Retrieve the number of rows in " + t.name)
		}
	}
	for i := 1; len(probes) < minProbes; i++ {
		add("Retrieve a few sample rows of the data the question is about (part " + strconv.Itoa(i) + ")")
	}
	for i, p := range probes {
		probes[i] = tag(info, p)
	}
	return probes
}

// moreProbes is a Planner's second batch: 1 to 3 probes it has not asked
// yet.
func (s *Server) moreProbes(rng *rand.Rand, info *exampleInfo, history string) []string {
	var cands []string
	for _, t := range s.pexaTables(rng, info) {
		cands = append(cands, "Retrieve the number of rows in "+t.name)
		if len(t.columns) > 0 {
			cands = append(cands, "Retrieve the minimum and maximum of "+t.columns[len(t.columns)-1]+" in "+t.name)
		}
		cands = append(cands, "Retrieve a few sample rows from "+t.name)
	}
	var fresh []string
	for _, p := range cands {
		if p = tag(info, p); !strings.Contains(history, p) {
			fresh = append(fresh, p)
		}
	}
	rng.Shuffle(len(fresh), func(i, j int) { fresh[i], fresh[j] = fresh[j], fresh[i] })
	return fresh[:min(len(fresh), 1+rng.IntN(3))]
}

// probeOf is the probe of a Test Case Generator prompt: what follows its
// last "Question: " line.
func probeOf(prompt string) string {
	if i := strings.LastIndex(prompt, "\nQuestion: "); i >= 0 {
		return strings.TrimSpace(prompt[i+len("\nQuestion: "):])
	}
	return ""
}

// probe forms, as planProbes and moreProbes write them.
const (
	formTable    = "table"
	formDistinct = "distinct"
	formSample   = "sample"
	formCount    = "count"
	formMinMax   = "minmax"
)

// probePlan is what a probe asks about.
type probePlan struct {
	table *tableInfo // the whole table (nil: none known)
	cols  []string
	form  string
}

// table returns the database table named name.
func (k *knowledge) table(info *exampleInfo, name string) *tableInfo {
	for _, t := range k.tables(info.ex) {
		if strings.EqualFold(t.name, name) {
			return t
		}
	}
	return nil
}

// parseProbe reads a probe llmsim wrote (its table is its last words);
// another probe is taken to be about the first gold table.
func (s *Server) parseProbe(info *exampleInfo, probe string) probePlan {
	p := strings.TrimSpace(probeTag.ReplaceAllString(probe, ""))
	var best *tableInfo
	for _, t := range s.know.tables(info.ex) {
		k := len(p) - len(t.name)
		if k > 0 && p[k-1] == ' ' && strings.EqualFold(p[k:], t.name) && (best == nil || len(t.name) > len(best.name)) {
			best = t
		}
	}
	goldCols := func(t *tableInfo) []string {
		for _, g := range s.know.goldTables(info) {
			if strings.EqualFold(g.name, t.name) {
				return g.columns
			}
		}
		return nil
	}
	if best == nil {
		for _, g := range s.know.goldTables(info) {
			if t := s.know.table(info, g.name); t != nil {
				return probePlan{table: t, cols: g.columns, form: formTable}
			}
		}
		return probePlan{}
	}
	head := strings.TrimSpace(p[:len(p)-len(best.name)])
	pick := func(list string) []string {
		var out []string
		for _, name := range strings.Split(list, ", ") {
			for _, c := range best.columns {
				if strings.EqualFold(c, strings.TrimSpace(name)) {
					out = append(out, c)
					break
				}
			}
		}
		return out
	}
	between := func(prefix, suffix string) (string, bool) {
		if strings.HasPrefix(head, prefix) && strings.HasSuffix(head, suffix) && len(head) >= len(prefix)+len(suffix) {
			return head[len(prefix) : len(head)-len(suffix)], true
		}
		return "", false
	}
	pp := probePlan{table: best, form: formTable}
	if list, ok := between("Retrieve a table of ", " from"); ok {
		pp.cols = pick(list)
	} else if col, ok := between("Retrieve the distinct values of ", " in"); ok {
		pp.cols, pp.form = pick(col), formDistinct
	} else if col, ok := between("Retrieve the minimum and maximum of ", " in"); ok {
		pp.cols, pp.form = pick(col), formMinMax
	} else if head == "Retrieve the number of rows in" {
		pp.form = formCount
	} else if head == "Retrieve a few sample rows from" {
		pp.form = formSample
	}
	if len(pp.cols) == 0 && (pp.form == formTable || pp.form == formDistinct || pp.form == formMinMax) {
		pp.cols = goldCols(best)
		if len(pp.cols) == 0 && len(best.columns) > 0 {
			pp.cols = best.columns[:1]
		}
		if len(pp.cols) == 0 {
			pp.form = formSample
		}
	}
	return pp
}

// probeQueries writes a probe's answering query, its alternatives and an
// exploration query, all valid in the example's dialect. misspell gives the
// first column a wrong name ("_x") in every answering query that names it,
// as a model that believes in a column that does not exist.
func probeQueries(info *exampleInfo, pp probePlan, misspell bool) (main sqlQuery, alts []sqlQuery, explore sqlQuery) {
	t := pp.table
	if t == nil {
		return sqlQuery{"A constant: no table of the schema matches the probe.", "SELECT 1 AS value", false, false},
			[]sqlQuery{{"A second constant, to check the executor.", "SELECT 2 AS value", false, false}},
			sqlQuery{"Explores nothing: a constant.", "SELECT 0 AS value", true, false}
	}
	vcols := pp.cols
	if len(vcols) == 0 && len(t.columns) > 0 {
		vcols = t.columns[:1]
	}
	quoted := make([]string, len(vcols))
	for i, c := range vcols {
		quoted[i] = quoteCol(info, c)
	}
	names := strings.Join(vcols, ", ")
	byColumn := pp.form == formTable || pp.form == formDistinct || pp.form == formMinMax
	if misspell && byColumn && len(quoted) > 0 {
		quoted[0] = quoteCol(info, vcols[0]+"_x")
	}
	sel := strings.Join(quoted, ", ")
	switch pp.form {
	case formDistinct:
		main = sqlQuery{fmt.Sprintf("Uses %s: the distinct values of %s.", t.name, vcols[0]), "SELECT DISTINCT " + quoted[0] + " FROM " + t.ref + " LIMIT 20", false, false}
	case formMinMax:
		main = sqlQuery{fmt.Sprintf("Uses %s: the smallest and largest %s.", t.name, vcols[0]),
			"SELECT MIN(" + quoted[0] + ") AS min_value, MAX(" + quoted[0] + ") AS max_value FROM " + t.ref, false, false}
	case formCount:
		main = sqlQuery{fmt.Sprintf("Uses %s: its number of rows.", t.name), "SELECT COUNT(*) AS row_count FROM " + t.ref, false, false}
	case formSample:
		main = sqlQuery{fmt.Sprintf("Uses %s: sample rows.", t.name), "SELECT * FROM " + t.ref + " LIMIT 20", false, false}
	default:
		main = sqlQuery{fmt.Sprintf("Uses %s: the distinct combinations of %s.", t.name, names), "SELECT DISTINCT " + sel + " FROM " + t.ref + " LIMIT 20", false, false}
	}
	if len(quoted) > 0 {
		alts = append(alts,
			sqlQuery{fmt.Sprintf("Uses %s without DISTINCT: the rows of %s where %s is known.", t.name, names, vcols[0]),
				"SELECT " + sel + " FROM " + t.ref + " WHERE " + quoted[0] + " IS NOT NULL LIMIT 20", false, false},
			sqlQuery{fmt.Sprintf("Uses %s: how often each %s occurs.", t.name, vcols[0]),
				"SELECT " + quoted[0] + ", COUNT(*) AS n FROM " + t.ref + " GROUP BY " + quoted[0] + " ORDER BY n DESC LIMIT 20", false, false})
	}
	if !byColumn && pp.form != formCount {
		alts = append(alts, sqlQuery{fmt.Sprintf("Uses %s: its number of rows.", t.name), "SELECT COUNT(*) AS row_count FROM " + t.ref, false, false})
	}
	explore = sqlQuery{fmt.Sprintf("Explores %s: a few rows with every column.", t.name), "SELECT * FROM " + t.ref + " LIMIT 5", true, false}
	return main, alts, explore
}

// promisingRight is how often the generator marks the probe's answering
// query most_promising rather than one of its alternatives.
const promisingRight = 0.85

// markPromising sets most_promising on one answering query of a batch:
// usually the probe's answering query (the first that is not
// exploration), else another answering query.
func markPromising(rng *rand.Rand, batch []sqlQuery) {
	var answering []int
	for i, q := range batch {
		if !q.Exploration {
			answering = append(answering, i)
		}
	}
	if len(answering) == 0 {
		return
	}
	pick := answering[0]
	if rng.Float64() >= promisingRight && len(answering) > 1 {
		pick = answering[1+rng.IntN(len(answering)-1)]
	}
	batch[pick].MostPromising = true
}

// sequentialPlan is a sequential Planner's plan: the first batch's probes,
// at most maxSequentialProbes, drawn from the example and the Planner's
// prompt alone so that every turn of the pass sees the same plan.
func (s *Server) sequentialPlan(info *exampleInfo, prompt string) []string {
	plan := s.planProbes(raiseRNG(s.cfg.Seed, 0, "pexa_sequential_plan", info.ex.ID, prompt), info)
	return plan[:min(len(plan), maxSequentialProbes)]
}

// nextSequentialProbe is the first probe of the plan the conversation has
// not asked yet ("" when none is left).
func (s *Server) nextSequentialProbe(info *exampleInfo, prompt, history string) string {
	for _, p := range s.sequentialPlan(info, prompt) {
		if !strings.Contains(history, p) {
			return p
		}
	}
	return ""
}

// testcaseBatch is a Test Case Generator's first batch: 2 to 4 queries, the
// answering one first (after an exploration query with probability 0.2).
// With probability ExploreError a column is misspelt throughout, so the
// batch fails and pexa_testcase_fix has something to fix.
func (s *Server) testcaseBatch(rng *rand.Rand, info *exampleInfo, pp probePlan) []sqlQuery {
	misspell := rng.Float64() < s.cfg.Noise.ExploreError
	n := 2 + rng.IntN(3)
	first := rng.Float64() < exploreFirst
	main, alts, explore := probeQueries(info, pp, misspell)
	var out []sqlQuery
	if first {
		out = append(out, explore)
	}
	seen := map[string]bool{}
	for _, q := range append([]sqlQuery{main}, alts...) {
		if !seen[q.SQL] {
			seen[q.SQL] = true
			out = append(out, q)
		}
	}
	if !first && len(out) < n {
		out = append(out, explore)
	}
	return out[:min(n, len(out))]
}

var queryFeedback = regexp.MustCompile(`(?m)^Query (\d+) \(.*?\): (Compilation Error|NULL Error|Success)`)

// testcaseFix answers a batch with no successful answering query: each
// failing query corrected (the misspelling removed; a query that returned
// no rows replaced by a row count; another error by sample rows), none of
// them exploration. With nothing to correct, the probe's answering query.
func (s *Server) testcaseFix(info *exampleInfo, pp probePlan, c convo, promising bool) []sqlQuery {
	var last toolMsg
	for _, tm := range c.lastToolGroup() {
		if tm.name == toolExecuteSQL {
			last = tm
		}
	}
	queries := batchQueries(last.call.Arguments)
	feedback := map[int]string{}
	for _, m := range queryFeedback.FindAllStringSubmatch(last.content, -1) {
		i, _ := strconv.Atoi(m[1])
		feedback[i] = m[2]
	}
	main, _, _ := probeQueries(info, pp, false)
	ref := "(SELECT 1 AS value) AS t"
	if pp.table != nil {
		ref = pp.table.ref
	}
	var out []sqlQuery
	seen := map[string]bool{}
	add := func(q sqlQuery) {
		if !seen[q.SQL] && len(out) < 4 {
			seen[q.SQL] = true
			out = append(out, q)
		}
	}
	for i, q := range queries {
		fb, ok := feedback[i+1]
		if !ok || q.Exploration {
			continue
		}
		fixed := sqlQuery{Description: "Corrected: " + q.Description, MostPromising: q.MostPromising}
		switch {
		case fb == "Success":
			fixed = q
		case misspelt.MatchString(q.SQL):
			fixed.SQL = misspelt.ReplaceAllString(q.SQL, "")
		case fb == "NULL Error":
			fixed.SQL = "SELECT COUNT(*) AS row_count FROM " + ref
		default:
			fixed.SQL = "SELECT * FROM " + ref + " LIMIT 20"
		}
		fixed.Exploration = false
		add(fixed)
	}
	if len(out) == 0 {
		main.MostPromising = promising
		add(main)
	}
	return out
}

// evidenceNamesGold reports whether a Proposer's evidence names every
// gold table.
func (s *Server) evidenceNamesGold(info *exampleInfo, prompt string) bool {
	evidence := prompt
	if _, rest, ok := strings.Cut(prompt, "Probes and SQL Queries:"); ok {
		evidence = rest
	}
	gold := s.know.goldTables(info)
	for _, t := range gold {
		if !regexp.MustCompile(`(?i)(^|[^A-Za-z0-9_])` + regexp.QuoteMeta(t.name) + `($|[^A-Za-z0-9_])`).MatchString(evidence) {
			return false
		}
	}
	return len(gold) > 0
}

var sqlComment = regexp.MustCompile(`--[^\n]*|/\*(?s:.*?)\*/`)

// sameSQL reports whether two statements are the same up to comments,
// white space, letter case and semicolons: how llmsim's gold answers
// differ from the gold SQL (rewrite). Stricter than the vote's word
// containment, which a wrapped gold query would pass.
func sameSQL(a, b string) bool {
	squash := func(s string) string {
		s = sqlComment.ReplaceAllString(s, " ")
		return strings.Map(func(r rune) rune {
			if r == ';' || r == ' ' || r == '\n' || r == '\t' || r == '\r' {
				return -1
			}
			return r
		}, strings.ToLower(s))
	}
	return squash(a) != "" && squash(a) == squash(b)
}

// section is the text between after and the next until ("" if absent).
func section(text, after, until string) string {
	_, rest, ok := strings.Cut(text, after)
	if !ok {
		return ""
	}
	if i := strings.Index(rest, until); i >= 0 {
		rest = rest[:i]
	}
	return strings.TrimSpace(rest)
}

// verify is the Semantic Verifier's JSON verdict: correct when the SQL is
// the gold SQL, flipped with probability 1-Verify.
func (s *Server) verify(rng *rand.Rand, info *exampleInfo, prompt string) string {
	question := section(prompt, "Original Question: ", "\nSQL Query:")
	if question == "" {
		question = info.ex.Question
	}
	sql := section(prompt, "\nSQL Query: ", "\nExecuted Result:")
	correct := sameSQL(sql, info.gold)
	if rng.Float64() >= s.cfg.Noise.Verify {
		correct = !correct
	}
	var tables []string
	for _, t := range s.know.tables(info.ex) {
		if regexp.MustCompile(`(?i)(^|[^A-Za-z0-9_])` + regexp.QuoteMeta(t.name) + `($|[^A-Za-z0-9_])`).MatchString(sql) {
			tables = append(tables, t.name)
		}
	}
	over := "the database"
	if len(tables) > 0 {
		over = strings.Join(tables, ", ")
	}
	v := struct {
		Correct     bool   `json:"correct"`
		Explanation string `json:"explanation"`
		Back        string `json:"back_translated_query"`
	}{Correct: correct}
	if correct {
		v.Explanation = "The back-translated query asks for the same result as the original question."
		v.Back = "Using " + over + ": " + question
	} else {
		v.Explanation = "The back-translated query differs from the original question in its filters, grouping or ordering. Potential improvement: follow the question's exact wording and the final probes."
		v.Back = "Return what this query computes over " + over + ", which is not quite: " + question
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return "```json\n" + strings.TrimSuffix(b.String(), "\n") + "\n```"
}

// MarkerPExAChooseFinal opens the agent's choose_final question (pexa
// ChooseFinalPrompt).
const MarkerPExAChooseFinal = "Call choose_final with the number"

const toolChooseFinal = "choose_final"

// choiceNumbers reads the numbers of the successful queries the agent's
// choose_final question lists ("Queries 1, 3 of your batch", "Query 2 of
// your batch").
var choiceNumbers = regexp.MustCompile(`Quer(?:y|ies) ([0-9][0-9, ]*) of your batch`)

// chooseFinal is the number, in the last execute_sql batch, of the query
// the simulated generator judges to answer its probe, having seen the
// results: its probe's main (gold-like) query when that succeeded, else
// the first success. The successes are the question's list, so the
// choice is one of them whatever form the batch's arguments took; the
// feedback lines stand in when the question lists none.
func chooseFinal(info *exampleInfo, pp probePlan, c convo) int {
	main, _, _ := probeQueries(info, pp, false)
	var listed []int
	if m, ok := c.tail(); ok {
		if g := choiceNumbers.FindStringSubmatch(m.Content); g != nil {
			for _, f := range strings.FieldsFunc(g[1], func(r rune) bool { return r == ',' || r == ' ' }) {
				if n, err := strconv.Atoi(f); err == nil && n > 0 {
					listed = append(listed, n)
				}
			}
		}
	}
	var queries []sqlQuery
	var ok []int // successful answering queries by the feedback
	for _, tm := range c.lastToolGroup() {
		if tm.name != toolExecuteSQL {
			continue
		}
		queries = batchQueries(tm.call.Arguments)
		for _, m := range queryFeedback.FindAllStringSubmatch(tm.content, -1) {
			n, _ := strconv.Atoi(m[1])
			if m[2] == "Success" && (n > len(queries) || !queries[n-1].Exploration) {
				ok = append(ok, n)
			}
		}
	}
	if len(listed) == 0 {
		listed = ok
	}
	for _, n := range listed {
		if n <= len(queries) && sameSQL(queries[n-1].SQL, main.SQL) {
			return n
		}
	}
	if len(listed) > 0 {
		return listed[0]
	}
	return 1
}
