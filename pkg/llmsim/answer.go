package llmsim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

// Noise is the skill of the simulated model.
type Noise struct {
	// Probabilities of a first answer being the gold SQL (rewritten so it is
	// not byte-identical), a syntax error, an empty-result query or a wrong
	// but valid query. The last three share what the first leaves, in
	// proportion to their values.
	Gold, SyntaxError, Empty, Wrong float64
	// Fix is the probability that a refinement with error feedback returns
	// the gold SQL.
	Fix float64
	// ExploreRight is the probability that exploration queries touch the
	// tables the gold SQL uses.
	ExploreRight float64
	// ExploreError is the probability that one exploration query has a
	// mistake (a misspelt column) for self-correction to fix.
	ExploreError float64
	// Link is the probability of a correct schema-linking answer.
	Link float64

	// PExA (spec pexa-raise.md §4.2). A Noise that sets none of these five
	// gets their defaults (see New), so skill settings written for ReFoRCE
	// keep a working PExA.
	//
	// PlanMore is the probability that the Planner asks for a second (and
	// last) batch of probes instead of proposing.
	PlanMore float64
	// NotEnoughInfo is the probability that the Test Case Generator calls a
	// probe unanswerable.
	NotEnoughInfo float64
	// ProposeBoost multiplies the Proposer's probability of the gold SQL
	// when its evidence names every gold table (0 = 1, no boost).
	ProposeBoost float64
	// VerifyCall is the probability that the Proposer calls the Semantic
	// Verifier on a SQL that executed with Success.
	VerifyCall float64
	// Verify is the probability of a right verdict from the Semantic
	// Verifier.
	Verify float64

	// RAISE (spec pexa-raise.md §4.2). A Noise that sets none of these
	// three gets their defaults (see New), as for PExA's.
	//
	// Ramble is the probability that a step of the agent's script is
	// preceded by about 2,000 tokens of thinking without a command, so a
	// 1,400-token segment cap cuts it and the agent's nudge path runs.
	Ramble float64
	// AgentCommands bounds the commands of a trajectory, [least, most];
	// [0, 0] is not a usable range and always means the default.
	AgentCommands [2]int
	// ColumnFix is the probability that the column post-process gives a
	// query that differs from the gold SQL only in its select list the
	// gold's select list.
	ColumnFix float64
}

// DefaultNoise is a model that gets about half of its first answers right.
func DefaultNoise() Noise {
	n := Noise{Gold: 0.5, SyntaxError: 0.15, Empty: 0.1, Wrong: 0.25, Fix: 0.5, ExploreRight: 0.8, ExploreError: 0.15, Link: 0.9}
	n.setPExADefaults()
	n.setRAISEDefaults()
	return n
}

// setPExADefaults gives the PExA fields the spec's defaults: Table 10's
// 1.26 plans per pass, rare unanswerable probes, and a verifier called on
// most proposals and right nine times in ten.
func (n *Noise) setPExADefaults() {
	n.PlanMore, n.NotEnoughInfo, n.ProposeBoost, n.VerifyCall, n.Verify = 0.26, 0.02, 1.2, 0.9, 0.9
}

// pexaUnset reports whether none of the PExA fields is set.
func (n Noise) pexaUnset() bool {
	return n.PlanMore == 0 && n.NotEnoughInfo == 0 && n.ProposeBoost == 0 && n.VerifyCall == 0 && n.Verify == 0
}

type outcome int

const (
	outGold outcome = iota + 1
	outSyntax
	outEmpty
	outWrong
)

func (s *Server) draw(rng *rand.Rand, info *exampleInfo) outcome {
	return s.drawBoosted(rng, info, 1)
}

// drawBoosted is draw with the probability of the gold SQL multiplied by
// boost (still at most 0.98).
func (s *Server) drawBoosted(rng *rand.Rand, info *exampleInfo, boost float64) outcome {
	n := s.cfg.Noise
	p := min(0.98, n.Gold*info.skill*boost)
	r := rng.Float64()
	if r < p {
		return outGold
	}
	rest := n.SyntaxError + n.Empty + n.Wrong
	if rest <= 0 {
		return outWrong
	}
	x := (r - p) / (1 - p) * rest
	switch {
	case x < n.SyntaxError:
		return outSyntax
	case x < n.SyntaxError+n.Empty:
		return outEmpty
	}
	return outWrong
}

// sqlFor writes the SQL of an outcome.
func (s *Server) sqlFor(rng *rand.Rand, info *exampleInfo, o outcome) string {
	opt := info.ex.Dialect.LexOptions()
	switch o {
	case outSyntax:
		return syntaxError(rng, info.gold, opt)
	case outEmpty:
		return "SELECT * FROM (\n" + info.gold + "\n) AS t WHERE 1 = 0"
	case outWrong:
		// Under a difficulty mix wrong answers cluster (Difficulty); the
		// draw is skipped without one, so the older answers stay.
		if info.cluster > 0 && rng.Float64() < info.cluster {
			return rewrite(rng, info.plausible, opt)
		}
		return wrongQuery(rng, info.gold, opt)
	}
	return rewrite(rng, info.gold, opt)
}

var keywords = map[string]bool{"SELECT": true, "FROM": true, "WHERE": true, "GROUP": true, "BY": true, "ORDER": true,
	"AS": true, "JOIN": true, "ON": true, "AND": true, "OR": true, "LIMIT": true, "WITH": true, "HAVING": true,
	"DESC": true, "ASC": true, "CASE": true, "WHEN": true, "THEN": true, "ELSE": true, "END": true, "IN": true,
	"NOT": true, "NULL": true, "IS": true, "LEFT": true, "INNER": true, "DISTINCT": true, "UNION": true, "ALL": true}

// rewrite returns SQL equivalent to gold but not byte-identical: a comment,
// keyword case, a trailing semicolon.
func rewrite(rng *rand.Rand, gold string, opt sqltext.Options) string {
	out := gold
	lower := rng.IntN(2) == 0
	words := sqltext.Words(out, opt)
	for i := len(words) - 1; i >= 0; i-- {
		w := words[i]
		if keywords[strings.ToUpper(w.Text)] {
			repl := strings.ToUpper(w.Text)
			if lower {
				repl = strings.ToLower(w.Text)
			}
			out = sqltext.ReplaceWord(out, w, repl)
		}
	}
	comments := []string{"-- final answer\n", "-- query for the task\n", "-- result\n", ""}
	out = comments[rng.IntN(len(comments))] + out
	if rng.IntN(2) == 0 {
		out += ";"
	}
	return out
}

func syntaxError(rng *rand.Rand, gold string, opt sqltext.Options) string {
	for _, w := range sqltext.Words(gold, opt) {
		if strings.EqualFold(w.Text, "FROM") {
			return sqltext.ReplaceWord(gold, w, "FORM")
		}
	}
	return gold + " WHERE"
}

var digits = regexp.MustCompile(`^[0-9]+$`)

// wrongQuery changes the gold SQL's meaning while keeping it valid: flip a
// sort order, move a LIMIT, change a number, swap MAX/MIN or SUM/AVG.
func wrongQuery(rng *rand.Rand, gold string, opt sqltext.Options) string {
	words := sqltext.Words(gold, opt)
	type edit struct {
		w    sqltext.Word
		repl string
	}
	var edits []edit
	for i, w := range words {
		u := strings.ToUpper(w.Text)
		switch {
		case u == "DESC":
			edits = append(edits, edit{w, "ASC"})
		case u == "ASC":
			edits = append(edits, edit{w, "DESC"})
		case u == "MAX":
			edits = append(edits, edit{w, "MIN"})
		case u == "MIN":
			edits = append(edits, edit{w, "MAX"})
		case u == "SUM":
			edits = append(edits, edit{w, "AVG"})
		case digits.MatchString(w.Text) && i > 0:
			n, _ := strconv.Atoi(w.Text)
			edits = append(edits, edit{w, strconv.Itoa(n + 1 + rng.IntN(3))})
		}
	}
	if len(edits) == 0 {
		// Nothing to flip: skip the first row, which changes any result.
		return "SELECT * FROM (\n" + gold + "\n) AS t LIMIT 1000000 OFFSET 1"
	}
	e := edits[rng.IntN(len(edits))]
	return sqltext.ReplaceWord(gold, e.w, e.repl)
}

func sqlBlock(intro, sql string) string {
	return intro + "\n\n```sql\n" + sql + "\n```"
}

// answer produces the reply text for a recognised kind.
func (s *Server) answer(rng *rand.Rand, kind Kind, info *exampleInfo, lastUser string) string {
	n := s.cfg.Noise
	switch kind {
	case KindFormat:
		header := info.header
		if header == "" {
			header = "answer"
		}
		return "The simplest answer format is:\n\n```csv\n" + header + "\n```"
	case KindGenerate, KindReaskSQL:
		o := s.draw(rng, info)
		return sqlBlock("Let me think step by step about the tables and columns the task needs.", s.sqlFor(rng, info, o))
	case KindRefine, KindCTERefine:
		if rng.Float64() < n.Fix*min(1.2, info.skill) {
			return sqlBlock("The error shows what was wrong; here is the corrected query.", s.sqlFor(rng, info, outGold))
		}
		o := s.draw(rng, info)
		return sqlBlock("Let me try a different approach.", s.sqlFor(rng, info, o))
	case KindSelfConsistency:
		if prev := lastBlock(lastUser, "Current sql:"); prev != "" && rng.Float64() < 0.7 {
			return sqlBlock("The answer looks right; keeping the query.", prev)
		}
		return sqlBlock("Reviewing the task once more.", s.sqlFor(rng, info, s.draw(rng, info)))
	case KindExplore:
		return s.exploration(rng, info)
	case KindExploreCorrect:
		return sqlBlock("--Description: corrected after the error.", s.correction(rng, info, lastUser))
	case KindExploreFixOther:
		return s.fixOthers(lastUser)
	case KindLink:
		return s.link(rng, info, lastUser)
	case KindVote:
		return s.vote(rng, info, lastUser)
	}
	return ""
}

// exploration writes 3 to 6 simple-to-complex queries over the gold tables
// (or, with probability 1-ExploreRight, other tables), each with LIMIT 20.
func (s *Server) exploration(rng *rand.Rand, info *exampleInfo) string {
	tables := s.know.goldTables(info)
	if len(tables) == 0 || rng.Float64() >= s.cfg.Noise.ExploreRight {
		all := s.know.tables(info.ex)
		tables = nil
		for i := 0; i < 2 && len(all) > 0; i++ {
			tables = append(tables, all[rng.IntN(len(all))])
		}
	}
	var qs []string
	broken := rng.Float64() < s.cfg.Noise.ExploreError
	for _, t := range tables {
		for j, c := range t.columns {
			if len(qs) >= 6 || j >= 3 {
				break
			}
			col := quoteCol(info, c)
			if broken {
				col = quoteCol(info, c+"_x")
				broken = false
			}
			qs = append(qs, fmt.Sprintf("--Description: distinct values of %s in %s\nSELECT DISTINCT %s FROM %s LIMIT 20;", c, t.name, col, t.ref))
		}
	}
	for len(qs) < 3 && len(tables) > 0 {
		t := tables[len(qs)%len(tables)]
		qs = append(qs, fmt.Sprintf("--Description: sample rows of %s\nSELECT * FROM %s LIMIT 20;", t.name, t.ref))
	}
	if len(qs) == 0 {
		qs = []string{"--Description: a constant\nSELECT 1 LIMIT 20;", "SELECT 2 LIMIT 20;", "SELECT 3 LIMIT 20;"}
	}
	return "I will explore the relevant columns from simple to complex.\n\n```sql\n" + strings.Join(qs, "\n\n") + "\n```"
}

func quoteCol(info *exampleInfo, c string) string {
	switch info.ex.Dialect {
	case "bigquery":
		return "`" + c + "`"
	case "snowflake":
		return `"` + c + `"`
	}
	return quoteSQLite(c)
}

var misspelt = regexp.MustCompile(`_x\b`)

// correction fixes a failing exploration query: the misspelt column the
// simulator introduced, else a simpler query on the same table.
func (s *Server) correction(rng *rand.Rand, info *exampleInfo, lastUser string) string {
	failing := afterMarker(lastUser, MarkerInputSQL)
	if failing == "" {
		failing = lastBlock(lastUser, "")
	}
	if misspelt.MatchString(failing) {
		return misspelt.ReplaceAllString(failing, "")
	}
	for _, t := range s.know.tables(info.ex) {
		if strings.Contains(failing, t.name) {
			return "SELECT * FROM " + t.ref + " LIMIT 20"
		}
	}
	return "SELECT 1"
}

// fixOthers returns the remaining queries listed in the request, with the
// simulator's own misspelling removed.
func (s *Server) fixOthers(lastUser string) string {
	_, list, ok := strings.Cut(lastUser, "SQLs:")
	if !ok {
		return "```sql\nSELECT 1;\n```"
	}
	var qs []string
	var raw []string
	if err := json.Unmarshal([]byte(firstJSONArray(list)), &raw); err == nil {
		for _, q := range raw {
			qs = append(qs, strings.TrimSuffix(misspelt.ReplaceAllString(strings.TrimSpace(q), ""), ";")+";")
		}
	}
	if len(qs) == 0 {
		return "```sql\nSELECT 1;\n```"
	}
	return "Corrected the other queries alike.\n\n```sql\n" + strings.Join(qs, "\n\n") + "\n```"
}

func firstJSONArray(s string) string {
	i := strings.IndexByte(s, '[')
	j := strings.LastIndexByte(s, ']')
	if i < 0 || j < i {
		return "[]"
	}
	return s[i : j+1]
}

var fullNameLine = regexp.MustCompile(`Table full name: *([^\n]+)`)

// link answers a table-level schema-linking question about the table whose
// "Table full name:" the request shows.
func (s *Server) link(rng *rand.Rand, info *exampleInfo, lastUser string) string {
	m := fullNameLine.FindStringSubmatch(lastUser)
	table := ""
	if m != nil {
		table = strings.TrimSpace(m[1])
		if i := strings.LastIndexByte(table, '.'); i >= 0 {
			table = table[i+1:]
		}
	}
	var cols []string
	related := false
	for _, t := range s.know.goldTables(info) {
		if strings.EqualFold(t.name, table) {
			related, cols = true, t.columns
		}
	}
	if rng.Float64() >= s.cfg.Noise.Link {
		related = !related
	}
	ans := map[string]any{"think": "Deciding whether " + table + " helps answer the task.", "answer": "N", "columns": []string{}}
	if related {
		ans["answer"] = "Y"
		if cols == nil {
			cols = []string{}
		}
		ans["columns"] = cols
	}
	b, _ := json.Marshal(ans)
	return "```json\n" + string(b) + "\n```"
}

var candidateName = regexp.MustCompile(`(?m)^SQL file name: *(\S+)`)

// vote picks a candidate: the one whose SQL matches the gold when it can
// tell, else the first, with some noise.
func (s *Server) vote(rng *rand.Rand, info *exampleInfo, lastUser string) string {
	names := candidateName.FindAllStringSubmatchIndex(lastUser, -1)
	if len(names) == 0 {
		return "```plaintext\n0result.sql\n```"
	}
	pick := lastUser[names[0][2]:names[0][3]]
	if rng.Float64() < s.cfg.Noise.Link {
		goldNorm := normalizeSQL(info.gold, info)
		for i, m := range names {
			end := len(lastUser)
			if i+1 < len(names) {
				end = names[i+1][0]
			}
			if strings.Contains(normalizeSQL(lastUser[m[1]:end], info), goldNorm) {
				pick = lastUser[m[2]:m[3]]
				break
			}
		}
	} else {
		m := names[rng.IntN(len(names))]
		pick = lastUser[m[2]:m[3]]
	}
	return "Comparing the candidates, the best answer is:\n\n```plaintext\n" + pick + "\n```"
}

func normalizeSQL(sql string, info *exampleInfo) string {
	var b strings.Builder
	for _, w := range sqltext.Words(sql, info.ex.Dialect.LexOptions()) {
		b.WriteString(strings.ToUpper(w.Text))
		b.WriteByte(' ')
	}
	return b.String()
}

// afterMarker returns the SQL following marker up to the next blank line or
// "The error information is".
func afterMarker(text, marker string) string {
	_, rest, ok := strings.Cut(text, marker)
	if !ok {
		return ""
	}
	if i := strings.Index(rest, MarkerErrorInfo); i >= 0 {
		rest = rest[:i]
	}
	return strings.TrimSpace(rest)
}

// sqlFence is an SQL block in the fences the personas write too (```SQL,
// ```sqlite, ```bigquery, …).
var sqlFence = regexp.MustCompile("(?s)```(?i:sql|sqlite|bigquery|googlesql|snowflake|postgresql)\\s*\n(.*?)\n```")

// lastBlock returns the last SQL block after marker (or anywhere).
func lastBlock(text, marker string) string {
	if marker != "" {
		_, rest, ok := strings.Cut(text, marker)
		if !ok {
			return ""
		}
		text = rest
	}
	all := sqlFence.FindAllStringSubmatch(text, -1)
	if len(all) == 0 {
		return strings.TrimSpace(text)
	}
	return strings.TrimSpace(all[len(all)-1][1])
}
