package eval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

// BIRD's execution accuracy (evaluation.py in the BIRD benchmark) runs the
// predicted and the gold SQL on the example's SQLite database and scores 1
// when set(predicted rows) == set(gold rows): rows are tuples, their order
// and duplicates do not matter, and cells compare as Python values do —
// None equals None, 1 == 1.0 (ints and floats by exact numeric value, so
// 0.1+0.2 != 0.3), strings exactly and case-sensitively, bytes never equal
// to str. Rows of different widths are different tuples. Two empty results
// are equal.

// BirdEqual reports whether two query results are equal under BIRD's rule.
// The rows are the cells a SQLite query returned (warehouse.Result.Rows), as
// Python's sqlite3 fetchall() would give them.
func BirdEqual(pred, gold [][]warehouse.Value) bool {
	return sameKeySet(rowKeys(pred, valueKey), rowKeys(gold, valueKey))
}

// BirdEqualFrames is BirdEqual for tables read from CSV (exec_result mode):
// cells are typed per column as ReadCSV types them, and a missing cell
// (NaN) plays SQL NULL's part, equal to another missing cell.
func BirdEqualFrames(pred, gold *Frame) bool {
	return sameKeySet(frameKeys(pred), frameKeys(gold))
}

func rowKeys(rows [][]warehouse.Value, key func(*strings.Builder, warehouse.Value)) map[string]struct{} {
	out := make(map[string]struct{}, len(rows))
	var b strings.Builder
	for _, r := range rows {
		b.Reset()
		for _, v := range r {
			key(&b, v)
		}
		out[b.String()] = struct{}{}
	}
	return out
}

func frameKeys(f *Frame) map[string]struct{} {
	if f == nil {
		return map[string]struct{}{}
	}
	out := make(map[string]struct{}, f.Rows)
	var b strings.Builder
	for r := 0; r < f.Rows; r++ {
		b.Reset()
		for _, c := range f.Columns {
			pyKey(&b, c.Cells[r])
		}
		out[b.String()] = struct{}{}
	}
	return out
}

func sameKeySet(a, b map[string]struct{}) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// Cell keys are self-delimiting, so a row's key is the concatenation of its
// cells' keys, and two cells have the same key exactly when Python finds
// them equal: "N;" for None; "i<integer>;" for every number with an
// integral value (1, 1.0 and True are equal in Python and hash alike);
// "f<repr>;" for other floats; "s<len>:<text>" for str and "b<len>:<bytes>"
// for bytes.

func valueKey(b *strings.Builder, v warehouse.Value) {
	switch v.Kind {
	case warehouse.Null:
		b.WriteString("N;")
	case warehouse.Int:
		b.WriteString("i" + strconv.FormatInt(v.Int, 10) + ";")
	case warehouse.Float:
		floatKey(b, v.Float)
	case warehouse.Bool:
		boolKey(b, v.Bool)
	case warehouse.Text:
		b.WriteString("s" + strconv.Itoa(len(v.Str)) + ":" + v.Str)
	case warehouse.Bytes:
		b.WriteString("b" + strconv.Itoa(len(v.Str)) + ":" + v.Str)
	default:
		b.WriteString("?" + strconv.Itoa(int(v.Kind)) + ";")
	}
}

func pyKey(b *strings.Builder, v PyValue) {
	switch v.Kind {
	case PyNaN:
		b.WriteString("N;")
	case PyInt:
		if v.Unsigned {
			b.WriteString("i" + strconv.FormatUint(v.U, 10) + ";")
		} else {
			b.WriteString("i" + strconv.FormatInt(v.I, 10) + ";")
		}
	case PyFloat:
		floatKey(b, v.F)
	case PyBool:
		boolKey(b, v.B)
	case PyStr:
		b.WriteString("s" + strconv.Itoa(len(v.S)) + ":" + v.S)
	default:
		b.WriteString("?" + strconv.Itoa(int(v.Kind)) + ";")
	}
}

func boolKey(b *strings.Builder, v bool) {
	if v {
		b.WriteString("i1;")
	} else {
		b.WriteString("i0;")
	}
}

// floatKey writes an integral float as the int it equals exactly (Python:
// 2.0 == 2 and 2.0**64 == 2**64), any other float by its shortest repr,
// which is unique per float64.
func floatKey(b *strings.Builder, f float64) {
	switch {
	case math.IsNaN(f):
		b.WriteString("fnan;")
	case math.IsInf(f, 1):
		b.WriteString("finf;")
	case math.IsInf(f, -1):
		b.WriteString("f-inf;")
	case f == math.Trunc(f):
		if f >= -(1<<63) && f < 1<<63 {
			b.WriteString("i" + strconv.FormatInt(int64(f), 10) + ";")
		} else {
			i, _ := big.NewFloat(f).Int(nil)
			b.WriteString("i" + i.String() + ";")
		}
	default:
		b.WriteString("f" + strconv.FormatFloat(f, 'g', -1, 64) + ";")
	}
}

// Difficulties are BIRD's difficulty labels in report order.
var Difficulties = []string{"simple", "moderate", "challenging"}

// BirdTask is one gold example of a BIRD evaluation.
type BirdTask struct {
	InstanceID string
	// GoldSQL is executed in sql mode.
	GoldSQL string
	// Difficulty is simple, moderate, challenging, or empty when unknown.
	Difficulty string
}

// BirdConfig configures a BIRD evaluation.
type BirdConfig struct {
	// Tasks are the gold examples. In sql mode they are the gold set, each
	// with its GoldSQL. In exec_result mode the gold set is the CSVs of
	// GoldDir and Tasks, when given, only supply difficulties.
	Tasks []BirdTask
	// GoldDir (exec_result mode) holds the gold results <instance_id>.csv,
	// directly or in exec_result/.
	GoldDir string
	// PredDir holds <instance_id>.sql (sql mode) or <instance_id>.csv.
	PredDir string
	Mode    Mode
	// Runner executes both the predicted and the gold SQL (sql mode).
	Runner SQLRunner
	// Workers scores this many instances at once; default 1.
	Workers int
	// ResultLimits are the limits Runner applies to each query (see
	// ResultLimits); a result they cut scores 0, and its error names them.
	ResultLimits warehouse.Limits
	// Limits bound the CSVs read (exec_result mode); zero fields take the
	// defaults.
	Limits Limits
	// CandidatesDir, when set, adds Best-of-N: CandidatesDir/<instance_id>/
	// holds the example's candidates (*.sql in sql mode, *.csv in
	// exec_result mode, as a run's output folder keeps them), and an
	// example counts when its final prediction or any candidate is right.
	CandidatesDir string
}

// DifficultyScore is BIRD's per-difficulty accuracy, over every gold
// example of that difficulty (a missing prediction counts as wrong).
type DifficultyScore struct {
	Difficulty string  `json:"difficulty"`
	Correct    int     `json:"correct"`
	Gold       int     `json:"gold"`
	EX         float64 `json:"ex"`
}

// BirdReport is a Report plus BIRD's breakdown by difficulty, present when
// any gold example's difficulty is known; its JSON form adds
// "by_difficulty" to the Report's fields.
type BirdReport struct {
	Report
	ByDifficulty []DifficultyScore `json:"by_difficulty,omitempty"`
	// BestOfN is present when candidates were scored (BirdConfig's
	// CandidatesDir).
	BestOfN *BestOfN `json:"best_of_n,omitempty"`
}

// EvaluateBird scores predictions with BIRD's execution accuracy. As in
// Evaluate, a failure on one instance (an SQL error, a timeout, an
// unreadable file) scores it 0 and is recorded; only problems with the
// folders themselves, or a cancelled context, return an error.
func EvaluateBird(ctx context.Context, cfg BirdConfig) (*BirdReport, error) {
	gs, err := newBirdGoldSet(cfg)
	if err != nil {
		return nil, err
	}
	w, err := newBirdWork(cfg, gs)
	if err != nil {
		return nil, err
	}
	scores, best := scoreBird(ctx, cfg, gs, w)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := &BirdReport{}
	rep.Ignored = w.ignored
	correct := tallyBird(rep, gs, w, scores)
	rep.ByDifficulty = byDifficulty(gs.order, gs.tasks, correct)
	if cfg.CandidatesDir != "" {
		rep.BestOfN = summarizeBestOfN(best, gs.order, gs.tasks)
	}
	return rep, nil
}

// birdGoldSet is what a BIRD evaluation scores against.
type birdGoldSet struct {
	mode  Mode
	tasks map[string]BirdTask
	// order holds the gold examples' ids: the tasks' in sql mode, the
	// gold CSVs' in exec_result mode.
	order []string
	gold  map[string]string // id -> gold CSV path (exec_result mode)
	// ext is the extension of the predictions and candidates: .sql or
	// .csv.
	ext string
}

func newBirdGoldSet(cfg BirdConfig) (*birdGoldSet, error) {
	gs := &birdGoldSet{mode: cfg.Mode, tasks: map[string]BirdTask{}, gold: map[string]string{}, ext: ".csv"}
	for _, t := range cfg.Tasks {
		if _, dup := gs.tasks[t.InstanceID]; !dup {
			gs.order = append(gs.order, t.InstanceID)
		}
		gs.tasks[t.InstanceID] = t
	}
	switch cfg.Mode {
	case ModeSQL:
		gs.ext = ".sql"
		if cfg.Runner == nil {
			return nil, errors.New("BIRD's sql mode executes the predicted and the gold SQL and needs the dataset (--dataset DIR)")
		}
		for id, t := range gs.tasks {
			if strings.TrimSpace(t.GoldSQL) == "" {
				return nil, fmt.Errorf("instance %s has no gold SQL", id)
			}
		}
	case ModeExecResult:
		gold, err := goldCSVs(cfg.GoldDir)
		if err != nil {
			return nil, err
		}
		gs.gold = gold
		gs.order = gs.order[:0]
		for id := range gold {
			gs.order = append(gs.order, id)
		}
	default:
		return nil, fmt.Errorf("unknown evaluation mode %q", cfg.Mode)
	}
	return gs, nil
}

// goldCSVs maps each id to its gold result <id>.csv in dir, or in
// dir/exec_result when there is one.
func goldCSVs(dir string) (map[string]string, error) {
	if st, err := os.Stat(filepath.Join(dir, "exec_result")); err == nil && st.IsDir() {
		dir = filepath.Join(dir, "exec_result")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("gold folder: %w", err)
	}
	gold := map[string]string{}
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".csv") {
			gold[strings.TrimSuffix(e.Name(), ".csv")] = filepath.Join(dir, e.Name())
		}
	}
	if len(gold) == 0 {
		return nil, fmt.Errorf("gold folder %s has no <instance_id>.csv gold results", dir)
	}
	return gold, nil
}

func (gs *birdGoldSet) has(id string) bool {
	if gs.mode == ModeSQL {
		_, ok := gs.tasks[id]
		return ok
	}
	_, ok := gs.gold[id]
	return ok
}

// birdWork is what a BIRD evaluation scores: the gold examples with a
// final prediction, then those with only candidates.
type birdWork struct {
	ids      []string
	hasFinal map[string]bool
	cands    map[string][]string // id -> its candidates' files
	// ignored are the predictions and candidate folders of examples not
	// in the gold set.
	ignored []string
}

func newBirdWork(cfg BirdConfig, gs *birdGoldSet) (*birdWork, error) {
	entries, err := os.ReadDir(cfg.PredDir)
	if err != nil {
		return nil, fmt.Errorf("prediction folder: %w", err)
	}
	w := &birdWork{hasFinal: map[string]bool{}}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), gs.ext) {
			continue
		}
		id := strings.TrimSuffix(e.Name(), gs.ext)
		if !gs.has(id) {
			w.ignored = append(w.ignored, e.Name())
			continue
		}
		w.hasFinal[id] = true
		w.ids = append(w.ids, id)
	}
	// Best-of-N also scores the examples that have candidates and no
	// final answer.
	w.cands, err = candidateFiles(cfg.CandidatesDir, gs.ext)
	if err != nil {
		return nil, err
	}
	for _, id := range sortedKeys(w.cands) {
		switch {
		case !gs.has(id):
			w.ignored = append(w.ignored, filepath.Join(filepath.Base(cfg.CandidatesDir), id)+"/")
		case !w.hasFinal[id]:
			w.ids = append(w.ids, id)
		}
	}
	return w, nil
}

// scoreBird scores w's examples on cfg.Workers goroutines, each example's
// score and Best-of-N verdict at its index in w.ids. A cancelled ctx stops
// handing out examples; the caller checks it.
func scoreBird(ctx context.Context, cfg BirdConfig, gs *birdGoldSet, w *birdWork) ([]InstanceScore, []BestOfNInstance) {
	ids := w.ids
	g := &BirdGold{Runner: cfg.Runner, ResultLimits: cfg.ResultLimits, Limits: cfg.Limits}
	scores := make([]InstanceScore, len(ids))
	best := make([]BestOfNInstance, len(ids))
	workers := max(cfg.Workers, 1)
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(workers, max(len(ids), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				id := ids[i]
				sc := birdScorer{cfg: cfg, gold: g, id: id, task: gs.tasks[id], goldCSV: gs.gold[id]}
				var s InstanceScore
				var final []byte
				ok := false
				if w.hasFinal[id] {
					s, final, ok = sc.instance(ctx, filepath.Join(cfg.PredDir, id+gs.ext))
				}
				scores[i] = s
				if cfg.CandidatesDir != "" {
					best[i] = sc.bestOfN(ctx, final, ok, w.cands[id])
				}
				g.Forget(id)
			}
		}()
	}
	for i := range ids {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return scores, best
}

// tallyBird fills rep's counts from the final predictions' scores (an
// example with only candidates counts as missing) and returns which
// examples were right.
func tallyBird(rep *BirdReport, gs *birdGoldSet, w *birdWork, scores []InstanceScore) map[string]bool {
	correct := map[string]bool{}
	for i, s := range scores {
		if !w.hasFinal[w.ids[i]] {
			continue
		}
		rep.Instances = append(rep.Instances, s)
		rep.Correct += s.Score
		correct[s.InstanceID] = s.Score == 1
	}
	sort.Slice(rep.Instances, func(i, j int) bool { return rep.Instances[i].InstanceID < rep.Instances[j].InstanceID })
	rep.Total = len(rep.Instances)
	if rep.Total > 0 {
		rep.EX = float64(rep.Correct) / float64(rep.Total)
	}
	rep.Missing = []string{}
	for _, id := range gs.order {
		if _, scored := correct[id]; !scored {
			rep.Missing = append(rep.Missing, id)
		}
	}
	sort.Strings(rep.Missing)
	rep.Gold = len(gs.order)
	if rep.Gold > 0 {
		rep.EXAllGold = float64(rep.Correct) / float64(rep.Gold)
	}
	return correct
}

// byDifficulty counts every gold example under its difficulty: BIRD's
// three labels first, then any other label in name order, then "unknown"
// for examples without one. Nil when no difficulty is known.
func byDifficulty(ids []string, tasks map[string]BirdTask, correct map[string]bool) []DifficultyScore {
	counts := map[string]*DifficultyScore{}
	known := false
	for _, id := range ids {
		d := strings.ToLower(strings.TrimSpace(tasks[id].Difficulty))
		if d == "" {
			d = "unknown"
		} else {
			known = true
		}
		c := counts[d]
		if c == nil {
			c = &DifficultyScore{Difficulty: d}
			counts[d] = c
		}
		c.Gold++
		if correct[id] {
			c.Correct++
		}
	}
	if !known {
		return nil
	}
	var out []DifficultyScore
	add := func(d string) {
		if c := counts[d]; c != nil {
			c.EX = float64(c.Correct) / float64(c.Gold)
			out = append(out, *c)
			delete(counts, d)
		}
	}
	for _, d := range Difficulties {
		add(d)
	}
	var rest []string
	for d := range counts {
		if d != "unknown" {
			rest = append(rest, d)
		}
	}
	sort.Strings(rest)
	for _, d := range rest {
		add(d)
	}
	add("unknown")
	return out
}
