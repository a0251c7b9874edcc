// Package outputs writes a run's results: one <instance_id>.sql and
// <instance_id>.csv per answered example in Spider 2.0's submission layout
// (what `quorum eval` and the official evaluator read), and run.json, the
// per-example and total account of what the run did and cost.
package outputs

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/eval"
)

// Example is one example's line in run.json.
type Example struct {
	InstanceID string `json:"instance_id"`
	// Question is the example's question, for the report's table.
	Question string `json:"question,omitempty"`
	// Agent answered the example.
	Agent    string `json:"agent,omitempty"`
	Dialect  string `json:"dialect"`
	Database string `json:"database"`
	// Status: answered, no_answer (no candidate produced rows) or failed
	// (the pipeline itself failed; Error says why).
	Status     string `json:"status"`
	Confidence string `json:"confidence,omitempty"`
	Method     string `json:"method,omitempty"`
	Rounds     int    `json:"rounds"`
	Candidates int    `json:"candidates"`
	// ValidCandidates produced rows that take part in the vote;
	// AgreedCandidates are those (by index) that agree with the answer.
	ValidCandidates  int       `json:"valid_candidates"`
	AgreedCandidates []int     `json:"agreed_candidates,omitempty"`
	Cost             cost.Cost `json:"cost"`
	// CostByStage splits Cost by agent stage (link, format, generate,
	// explore, regenerate, vote).
	CostByStage cost.Ledger `json:"cost_by_stage,omitempty"`
	// LatencySeconds runs from the example's publication to the recording
	// of its final answer, in whichever sessions those were (a pause
	// between sessions included).
	LatencySeconds float64 `json:"latency_seconds"`
	// CriticalPathSeconds is the slowest candidate chain per round (LLM
	// and warehouse time); TaskSeconds/Tasks the wall time of its tasks;
	// FinishedSeconds when it finished, from the run's start (its first
	// session's), and Session the session it finished in (1 on).
	CriticalPathSeconds float64 `json:"critical_path_seconds,omitempty"`
	TaskSeconds         float64 `json:"task_seconds,omitempty"`
	Tasks               int     `json:"tasks,omitempty"`
	FinishedSeconds     float64 `json:"finished_seconds,omitempty"`
	Session             int     `json:"session,omitempty"`
	// ServiceSeconds is LatencySeconds less the time the example queued
	// before its first task started.
	ServiceSeconds float64 `json:"service_seconds,omitempty"`
	// Correct and CorrectAtK are set when gold exists: the final answer,
	// and whether any candidate was right (EX@k, the RAISE paper's
	// Best-of-N). Metric says how they were judged: "spider2" against the
	// gold result CSVs, or "bird" (BIRD's execution accuracy) against the
	// rows of the gold SQL run on the example's database.
	Correct    *bool  `json:"correct,omitempty"`
	CorrectAtK *bool  `json:"correct_at_k,omitempty"`
	Metric     string `json:"metric,omitempty"`
	// Gold shows a wrong answer against gold, for a reader: the gold SQL
	// and how the answer's rows differ from the gold rows (Correct is the
	// verdict, by Metric's rules; this only explains it).
	Gold  *GoldDiff `json:"gold,omitempty"`
	Error string    `json:"error,omitempty"`
	// Members are an ensemble's member decisions (their answers are in
	// members/<agent>/), and Rule how they were combined.
	Members []Member `json:"members,omitempty"`
	Rule    string   `json:"rule,omitempty"`
	// StoppedAfter is how many candidates adaptive sampling drew before
	// its rule settled the example (absent when every one was drawn);
	// Posterior is the rule's confidence in the majority after the last
	// wave (absent under fixed sampling).
	StoppedAfter int     `json:"stopped_after,omitempty"`
	Posterior    float64 `json:"posterior_confidence,omitempty"`
}

// GoldDiff is a wrong answer set against gold: the gold SQL (where the
// dataset has it, cut at MaxGoldSQL bytes) and the rows (eval.DiffRows
// against the gold table closest to the answer).
type GoldDiff struct {
	SQL string `json:"sql,omitempty"`
	*eval.RowDiff
}

// NewGoldDiff sets answer against the one of golds closest to it (the
// fewest rows missing and extra), with the gold SQL cut at MaxGoldSQL;
// nil without a gold table.
func NewGoldDiff(answer *eval.Frame, golds []*eval.Frame, goldSQL string) *GoldDiff {
	var best *eval.RowDiff
	for _, g := range golds {
		d := eval.DiffRows(answer, g, GoldRowsShown)
		if best == nil || d.MissingCount+d.ExtraCount < best.MissingCount+best.ExtraCount {
			best = d
		}
	}
	if best == nil {
		return nil
	}
	if len(goldSQL) > MaxGoldSQL {
		goldSQL = goldSQL[:MaxGoldSQL] + "…"
	}
	return &GoldDiff{SQL: goldSQL, RowDiff: best}
}

// Quantile is the p-quantile of sorted (0 if empty) as every report and
// comparison of runs states it: the element at index p·n, so the same
// latencies give the same p50 and p95 wherever they are shown.
func Quantile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// MaxGoldSQL bounds the gold SQL a report carries per example.
const MaxGoldSQL = 8 << 10

// GoldRowsShown is how many missing and extra rows a GoldDiff lists.
const GoldRowsShown = 10

// Member is one member agent's decision of an ensemble example.
type Member struct {
	Agent      string `json:"agent"`
	Status     string `json:"status"`
	Confidence string `json:"confidence,omitempty"`
	Method     string `json:"method,omitempty"`
	Valid      int    `json:"valid_candidates"`
	// Agrees says whether its answer agrees with the ensemble's.
	Agrees  bool  `json:"agrees_with_final"`
	Correct *bool `json:"correct,omitempty"`
	// StoppedAfter and Posterior are the member's own adaptive-sampling
	// verdict, as Example's.
	StoppedAfter int     `json:"stopped_after,omitempty"`
	Posterior    float64 `json:"posterior_confidence,omitempty"`
}

// Report is run.json.
type Report struct {
	RunID   string `json:"run_id"`
	Dataset string `json:"dataset"`
	// Agent ran the run, with these options.
	Agent        string            `json:"agent,omitempty"`
	AgentOptions map[string]string `json:"agent_options,omitempty"`
	Seed         uint64            `json:"seed"`
	Votes        int               `json:"votes"`
	LLM          string            `json:"llm"`
	// QuorumVersion and Revision name the quorum that wrote the report
	// (internal/version); DatasetFingerprint what its examples asked
	// (dataset.Fingerprint), so two reports say whether they answered
	// the same questions.
	QuorumVersion      string `json:"quorum_version,omitempty"`
	Revision           string `json:"revision,omitempty"`
	DatasetFingerprint string `json:"dataset_fingerprint,omitempty"`
	// Started is when the run's first session started, Finished when its
	// last ended.
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Sessions are the stretches the run was driven in, in order: a run
	// interrupted and resumed has several (absent where a report has none,
	// quorum solve's).
	Sessions []Session `json:"sessions,omitempty"`
	// Limits are what the limiter learned of the models' real limits by
	// the run's end, where the provider said anything (a stated limit or
	// a 429).
	Limits []LimitLearned `json:"limits,omitempty"`
	// LimitChanges are the quotas set on the running cluster (quorum
	// limits set or clear) between the run's start and its end.
	LimitChanges []LimitChange `json:"limit_changes,omitempty"`
	Examples     []Example     `json:"examples"`
	Totals       Totals        `json:"totals"`
	// Skipped are the dataset's task lines left out (--skip-invalid),
	// each with its file:line and why.
	Skipped []string `json:"skipped,omitempty"`
	// Warnings are what the run was told at its start about a setup that
	// departs from its agent's paper (RAISE's three final models).
	Warnings []string `json:"warnings,omitempty"`
}

// Session is one stretch of a run, from a start to an interruption, a
// crash or the end.
type Session struct {
	// Number is the session's, from 1 (Example.Session names it).
	Number   int       `json:"number"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Seconds  float64   `json:"seconds"`
	// Examples are those whose final answer was recorded in the session.
	Examples int `json:"examples"`
	// EndUnknown: the session's process died without recording its end;
	// Finished is the last it was seen (a heartbeat or a final answer).
	EndUnknown bool `json:"end_unknown,omitempty"`
}

// Totals summarise the examples.
type Totals struct {
	Examples   int       `json:"examples"`
	Answered   int       `json:"answered"`
	NoAnswer   int       `json:"no_answer"`
	Failed     int       `json:"failed"`
	HighConf   int       `json:"high_confidence"`
	LowConf    int       `json:"low_confidence"`
	Cost       cost.Cost `json:"cost"`
	Scored     int       `json:"scored"`
	Correct    int       `json:"correct"`
	CorrectAtK int       `json:"correct_at_k"`
	EX         *float64  `json:"ex,omitempty"`
	EXAtK      *float64  `json:"ex_at_k,omitempty"`
	// K is the most candidates an example decided in one round had
	// (ReFoRCE's votes, PExA's passes), kept for older readers: it
	// undercounts examples that took more rounds, so EX@k is labelled by
	// KMin–KMax.
	K int `json:"k,omitempty"`
	// KMin and KMax are the fewest and most candidates a scored example
	// drew, every round's (its candidates are what EX@k's "any" ranges
	// over); examples that drew none (failed first) are left out.
	KMin int `json:"k_min,omitempty"`
	KMax int `json:"k_max,omitempty"`
	// ByConfidence and ByMethod are how often the final answer was right
	// at each confidence and with each method, over the scored examples
	// only ("none": failed or no answer).
	ByConfidence []Calibration `json:"accuracy_by_confidence,omitempty"`
	ByMethod     []Calibration `json:"accuracy_by_method,omitempty"`
	// WallSeconds is the time the run was running: the sum of its
	// sessions' Seconds (Finished − Started without sessions).
	// SpanSeconds runs from Started to Finished, pauses between sessions
	// included.
	WallSeconds   float64 `json:"wall_seconds"`
	SpanSeconds   float64 `json:"span_seconds"`
	CallsPerEx    float64 `json:"llm_calls_per_example"`
	QueriesPerEx  float64 `json:"warehouse_queries_per_example"`
	TokensPerCall float64 `json:"tokens_per_llm_call"`
	// MoneyPerEx is Cost.LLM.Money per example, at the endpoints' prices;
	// CachedShare the share of prompt tokens served from a provider's
	// prompt cache.
	MoneyPerEx  float64 `json:"money_per_example"`
	CachedShare float64 `json:"cached_share"`
}

// KOrVotes is the k of EX@k: the most candidates a scored example drew,
// else (an older run.json) K, else the run's votes.
func (t Totals) KOrVotes(votes int) int {
	if t.KMax > 0 {
		return t.KMax
	}
	if t.K > 0 {
		return t.K
	}
	return votes
}

// KRange says what k was: "8" when every scored example drew 8
// candidates, "3–12" when they differed (votes stands in for a run.json
// written before k_min/k_max).
func (t Totals) KRange(votes int) string {
	if t.KMin > 0 && t.KMin != t.KMax {
		return fmt.Sprintf("%d–%d", t.KMin, t.KMax)
	}
	return fmt.Sprint(t.KOrVotes(votes))
}

// EXAtKName is EX@k's label: EX@8 when every example drew 8 candidates,
// EX@k when the number differed (a single number would misstate it).
func (t Totals) EXAtKName(votes int) string {
	if t.KMin > 0 && t.KMin != t.KMax {
		return "EX@k"
	}
	return fmt.Sprintf("EX@%d", t.KOrVotes(votes))
}

// EXAtKMeaning says in words what EX@k measured, for a label.
func (t Totals) EXAtKMeaning(votes int) string {
	if t.KMin > 0 && t.KMin != t.KMax {
		return "any candidate right; k = candidates drawn per example, " + t.KRange(votes)
	}
	return fmt.Sprintf("any of an example's %d candidates right", t.KOrVotes(votes))
}

// Calibration is how often the final answer was right among the scored
// examples of one confidence level or one method.
type Calibration struct {
	Value    string  `json:"value"`
	Examples int     `json:"examples"`
	Correct  int     `json:"correct"`
	EX       float64 `json:"ex"`
}

// String is the figure as the report and the summary print it.
func (c Calibration) String() string {
	return fmt.Sprintf("%s: %d of %d right (%.3f)", c.Value, c.Correct, c.Examples, c.EX)
}

// confidenceRank orders confidence levels from most to least sure;
// others follow alphabetically, "none" last.
var confidenceRank = map[string]int{"high": 0, "medium": 1, "low": 2}

// calibrate counts, over the scored examples, those right per value of
// key ("" counts as "none"). Confidence levels go most sure first;
// methods most used first; "none" last either way.
func calibrate(ex []Example, key func(Example) string, byRank bool) []Calibration {
	at := map[string]int{}
	var out []Calibration
	for _, e := range ex {
		if e.Correct == nil {
			continue
		}
		v := key(e)
		if v == "" {
			v = "none"
		}
		i, ok := at[v]
		if !ok {
			i = len(out)
			at[v] = i
			out = append(out, Calibration{Value: v})
		}
		out[i].Examples++
		if *e.Correct {
			out[i].Correct++
		}
	}
	for i := range out {
		out[i].EX = float64(out[i].Correct) / float64(out[i].Examples)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.Value == "none") != (b.Value == "none") {
			return b.Value == "none"
		}
		if byRank {
			ra, oka := confidenceRank[a.Value]
			rb, okb := confidenceRank[b.Value]
			if oka != okb || ra != rb {
				return oka && (!okb || ra < rb)
			}
		} else if a.Examples != b.Examples {
			return a.Examples > b.Examples
		}
		return a.Value < b.Value
	})
	return out
}

// Summarize fills r.Totals from r.Examples.
func (r *Report) Summarize() {
	sort.Slice(r.Examples, func(i, j int) bool { return r.Examples[i].InstanceID < r.Examples[j].InstanceID })
	span := r.Finished.Sub(r.Started).Seconds()
	t := Totals{Examples: len(r.Examples), WallSeconds: span, SpanSeconds: span}
	if len(r.Sessions) > 0 {
		t.WallSeconds = 0
		for _, s := range r.Sessions {
			t.WallSeconds += s.Seconds
		}
	}
	for _, e := range r.Examples {
		switch e.Status {
		case "answered":
			t.Answered++
		case "no_answer":
			t.NoAnswer++
		default:
			t.Failed++
		}
		switch e.Confidence {
		case "high":
			t.HighConf++
		case "low":
			t.LowConf++
		}
		t.Cost.Add(e.Cost)
		if e.Rounds == 1 {
			t.K = max(t.K, e.Candidates)
		}
		if e.Correct != nil {
			t.Scored++
			if *e.Correct {
				t.Correct++
			}
			if e.CorrectAtK != nil && *e.CorrectAtK {
				t.CorrectAtK++
			}
			if e.Candidates > 0 {
				if t.KMin == 0 || e.Candidates < t.KMin {
					t.KMin = e.Candidates
				}
				t.KMax = max(t.KMax, e.Candidates)
			}
		}
	}
	t.ByConfidence = calibrate(r.Examples, func(e Example) string { return e.Confidence }, true)
	t.ByMethod = calibrate(r.Examples, func(e Example) string { return e.Method }, false)
	if t.Scored > 0 {
		ex := float64(t.Correct) / float64(t.Scored)
		k := float64(t.CorrectAtK) / float64(t.Scored)
		t.EX, t.EXAtK = &ex, &k
	}
	if t.Examples > 0 {
		t.CallsPerEx = float64(t.Cost.LLMCalls) / float64(t.Examples)
		t.QueriesPerEx = float64(t.Cost.Queries) / float64(t.Examples)
		t.MoneyPerEx = t.Cost.Money() / float64(t.Examples)
	}
	t.CachedShare = t.Cost.CachedShare()
	if t.Cost.LLMCalls > 0 {
		t.TokensPerCall = float64(t.Cost.Tokens()) / float64(t.Cost.LLMCalls)
	}
	r.Totals = t
}

// Writer writes into one output folder.
type Writer struct {
	Dir string
}

// Outputs hold every tenant's questions and result rows: files are
// written 0600 and folders created 0700, readable by their owner only.
const (
	FileMode os.FileMode = 0o600
	DirMode  os.FileMode = 0o700
)

// NewWriter creates dir (0700).
func NewWriter(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return nil, fmt.Errorf("output folder %s: %w", dir, err)
	}
	return &Writer{Dir: dir}, nil
}

// PrivateDir creates dir and its missing parents 0700 and makes dir itself
// 0700 if it existed with more: a state folder (Redis's append-only file,
// the NATS store) must not be readable by other local users.
func PrivateDir(dir string) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("folder %s: %w", dir, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("folder %s: %w", dir, err)
	}
	if st.Mode().Perm()&^DirMode != 0 {
		if err := os.Chmod(dir, DirMode); err != nil {
			return fmt.Errorf("folder %s: make it private: %w", dir, err)
		}
	}
	return nil
}

// Member returns the writer of an ensemble member's answers,
// members/<agent>/ inside the run's folder (quorum eval scores it like any
// predictions folder).
func (w *Writer) Member(agent string) (*Writer, error) {
	return NewWriter(filepath.Join(w.Dir, "members", agent))
}

// CandidatesDir is the folder of a run's output holding every example's
// candidates, candidates/<instance_id>/ (quorum eval --best-of-n reads it).
const CandidatesDir = "candidates"

// CandidateName is a candidate's file name without extension: its round
// and index, which together identify it within its example.
func CandidateName(round, index int) string {
	return fmt.Sprintf("r%d_c%d", round, index)
}

// Candidate writes one candidate of an example as
// candidates/<id>/<name>.sql, and <name>.csv when it produced a result
// (csv nil: it did not), atomically as Answer does.
func (w *Writer) Candidate(id, name, sql string, csv *string) error {
	if err := dataset.CheckName(id); err != nil {
		return fmt.Errorf("candidate of instance %q: %w", id, err)
	}
	if err := dataset.CheckName(name); err != nil {
		return fmt.Errorf("candidate %q of instance %s: %w", name, id, err)
	}
	dir := filepath.Join(w.Dir, CandidatesDir, id)
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("candidates of instance %s: %w", id, err)
	}
	if csv != nil {
		if err := writeAtomic(filepath.Join(dir, name+".csv"), []byte(*csv)); err != nil {
			return err
		}
	}
	return writeAtomic(filepath.Join(dir, name+".sql"), []byte(sql+"\n"))
}

// TracesDir is the folder of a run's output holding each example's trace,
// traces/<instance_id>.json.gz (quorum trace --out reads it; gzip because
// prompts compress tenfold).
const TracesDir = "traces"

// TraceFile is the file of an example's trace inside TracesDir.
func TraceFile(id string) string { return id + ".json.gz" }

// Trace writes an example's trace (JSON) gzipped as
// traces/<id>.json.gz, atomically.
func (w *Writer) Trace(id string, data []byte) error {
	if err := dataset.CheckName(id); err != nil {
		return fmt.Errorf("trace of instance %q: %w", id, err)
	}
	dir := filepath.Join(w.Dir, TracesDir)
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("traces: %w", err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		return fmt.Errorf("trace of instance %s: %w", id, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("trace of instance %s: %w", id, err)
	}
	return writeAtomic(filepath.Join(dir, TraceFile(id)), buf.Bytes())
}

// Page writes an example's trace page, examples/<id>.html, atomically.
func (w *Writer) Page(id string, html []byte) error {
	if err := dataset.CheckName(id); err != nil {
		return fmt.Errorf("page of instance %q: %w", id, err)
	}
	dir := filepath.Join(w.Dir, ExamplesDir)
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("example pages: %w", err)
	}
	return writeAtomic(filepath.Join(dir, PageFile(id)), html)
}

// ReadTrace reads an example's trace written by Trace.
func ReadTrace(dir, id string) ([]byte, error) {
	f, err := os.Open(filepath.Join(dir, TracesDir, TraceFile(id)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", f.Name(), err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", f.Name(), err)
	}
	return b, nil
}

// Answer writes <id>.sql and <id>.csv atomically (a crash never leaves a
// half-written answer that a resume would take for finished). An id that
// could be taken for a path is refused: answers stay in the folder.
func (w *Writer) Answer(id, sql, csv string) error {
	if err := dataset.CheckName(id); err != nil {
		return fmt.Errorf("answer for instance %q: %w", id, err)
	}
	if err := writeAtomic(filepath.Join(w.Dir, id+".csv"), []byte(csv)); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(w.Dir, id+".sql"), []byte(sql+"\n"))
}

// Report writes run.json and then report.html, the same run for a reader.
// run.json goes first: it is what resuming and scoring read, so a report
// that fails to render must not cost it.
func (w *Writer) Report(r *Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("run.json: %w", err)
	}
	if err := writeAtomic(filepath.Join(w.Dir, "run.json"), append(b, '\n')); err != nil {
		return err
	}
	// The report links the trace pages written before it.
	pages := map[string]bool{}
	for _, id := range Linked(r) {
		if _, err := os.Stat(filepath.Join(w.Dir, ExamplesDir, PageFile(id))); err == nil {
			pages[id] = true
		}
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, r, &Extra{Pages: pages, Dir: w.Dir}); err != nil {
		return fmt.Errorf("render %s: %w", filepath.Join(w.Dir, "report.html"), err)
	}
	return writeAtomic(filepath.Join(w.Dir, "report.html"), buf.Bytes())
}

// ReadReport reads the run.json in dir.
func ReadReport(dir string) (*Report, error) {
	path := filepath.Join(dir, "run.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("run report: %w", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("run report %s: %w", path, err)
	}
	return &r, nil
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	// WriteFile's mode applies only to a new file: a .tmp left by a crash
	// is removed so the answer does not inherit its mode.
	_ = os.Remove(tmp)
	if err := os.WriteFile(tmp, data, FileMode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// LimitLearned is what the limiter learned of one model's limits: the
// quota it was configured with (or set on the running cluster), what the
// provider's headers stated and what its 429s taught (0: none).
type LimitLearned struct {
	Endpoint      string  `json:"endpoint,omitempty"`
	Model         string  `json:"model"`
	ConfiguredRPM float64 `json:"configured_rpm,omitempty"`
	ConfiguredTPM float64 `json:"configured_tpm,omitempty"`
	StatedRPM     float64 `json:"stated_rpm,omitempty"`
	StatedTPM     float64 `json:"stated_tpm,omitempty"`
	LearnedRPM    float64 `json:"learned_rpm,omitempty"`
	LearnedTPM    float64 `json:"learned_tpm,omitempty"`
	// Cuts are the 429s this session cut the rate for.
	Cuts int `json:"cuts,omitempty"`
}

// LimitChange is a quota set (or cleared) on the running cluster: its
// group (llm:<model>, llm@<endpoint>:<model>), the requests and tokens a
// minute set (0: as configured), and when.
type LimitChange struct {
	Group   string    `json:"group"`
	RPM     float64   `json:"rpm,omitempty"`
	TPM     float64   `json:"tpm,omitempty"`
	At      time.Time `json:"at"`
	Cleared bool      `json:"cleared,omitempty"`
}

// String says what changed: "llm:gpt-4o set to 1500 req/min".
func (c LimitChange) String() string {
	if c.Cleared {
		return c.Group + " back to its configured quota"
	}
	var parts []string
	if c.RPM > 0 {
		parts = append(parts, fmt.Sprintf("%.0f req/min", c.RPM))
	}
	if c.TPM > 0 {
		parts = append(parts, fmt.Sprintf("%.0f tokens/min", c.TPM))
	}
	return c.Group + " set to " + strings.Join(parts, " and ")
}

// Note says what was learned, with a hint where the configured quota
// looks wrong: above what the provider states, or above what its 429s
// allowed (another client shares it).
func (l LimitLearned) Note() string {
	limits := func(rpm, tpm float64) string {
		var parts []string
		if rpm > 0 {
			parts = append(parts, fmt.Sprintf("%.0f req/min", rpm))
		}
		if tpm > 0 {
			parts = append(parts, fmt.Sprintf("%.0f tokens/min", tpm))
		}
		if len(parts) == 0 {
			return "no limit"
		}
		return strings.Join(parts, " and ")
	}
	name := l.Model
	if l.Endpoint != "" && l.Endpoint != "default" {
		name += " at " + l.Endpoint
	}
	note := fmt.Sprintf("%s: configured %s; the provider stated %s", name, limits(l.ConfiguredRPM, l.ConfiguredTPM), limits(l.StatedRPM, l.StatedTPM))
	if l.LearnedRPM > 0 || l.LearnedTPM > 0 {
		note += "; its 429s left " + limits(l.LearnedRPM, l.LearnedTPM) + " in force"
	}
	over := func(configured, truth float64) bool { return truth > 0 && (configured == 0 || configured > truth) }
	switch {
	case over(l.ConfiguredRPM, l.StatedRPM) || over(l.ConfiguredTPM, l.StatedTPM):
		var flags []string
		if l.StatedRPM > 0 {
			flags = append(flags, fmt.Sprintf("--llm-rpm %.0f", l.StatedRPM))
		}
		if l.StatedTPM > 0 {
			flags = append(flags, fmt.Sprintf("--llm-tpm %.0f", l.StatedTPM))
		}
		note += " — the configured quota is not the provider's: configure the stated one (" + strings.Join(flags, ", ") + ")"
	case l.LearnedRPM > 0 || l.LearnedTPM > 0:
		note += " — the provider allowed less than configured: another client may share the quota"
	}
	return note
}

// RateLimitNote says what a run's 429s were: their share of the requests
// sent, and, past 1 %, that the configured quota looks higher than the
// provider's (or shared with other clients). The summary and report.html
// print it; the limiter absorbs 429s without losing work, so nothing else
// would tell a user why the run was slower than its quota.
func RateLimitNote(c cost.Cost) string {
	n, sent := c.LLM.RateLimited, max(c.LLM.Attempts, c.LLMCalls)
	if n == 0 || sent == 0 {
		return "none"
	}
	share := float64(n) / float64(sent)
	note := fmt.Sprintf("%.1f %% of %d requests sent", 100*share, sent)
	if share > 0.01 {
		note += "; more than 1 %: the provider's limit is below the configured one (--llm-rpm, --llm-tpm, the model's quota) or another client shares it; configure the provider's real limits"
	}
	return note
}
