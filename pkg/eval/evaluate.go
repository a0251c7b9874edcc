package eval

import (
	"context"
	"errors"
	"fmt"
	"github.com/quorumsql/quorum/pkg/dataset"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Mode is what the prediction files hold.
type Mode string

// Evaluation modes, as in Spider 2.0's evaluate.py.
const (
	ModeExecResult Mode = "exec_result"
	ModeSQL        Mode = "sql"
)

// ParseMode checks a --mode value.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeExecResult, ModeSQL:
		return Mode(s), nil
	}
	return "", fmt.Errorf("unknown evaluation mode %q: use exec_result or sql", s)
}

// SQLRunner executes a predicted SQL on the database of an instance (sql
// mode). The dataset package provides one.
type SQLRunner interface {
	RunInstanceSQL(ctx context.Context, instanceID, sql string) (*warehouse.Result, warehouse.Dialect, error)
}

// Config configures an evaluation.
type Config struct {
	// GoldDir holds one *_eval.jsonl and exec_result/.
	GoldDir string
	// PredDir holds <instance_id>.csv or <instance_id>.sql files.
	PredDir string
	Mode    Mode
	// Runner executes predictions in sql mode.
	Runner SQLRunner
	// ResultLimits are the limits Runner applies to each query (see
	// ResultLimits); a result they cut scores 0, and its error names them.
	ResultLimits warehouse.Limits
	// Limits bound the CSVs read and the comparisons made; zero fields take
	// the defaults.
	Limits Limits
}

// InstanceScore is one instance's verdict.
type InstanceScore struct {
	InstanceID string `json:"instance_id"`
	Score      int    `json:"score"`
	Error      string `json:"error"`
}

// Report is an evaluation's result; its JSON form is what `quorum eval
// --json` prints.
type Report struct {
	Instances []InstanceScore `json:"instances"`
	Correct   int             `json:"correct"`
	Total     int             `json:"total"`
	EX        float64         `json:"ex"`
	// Ignored lists prediction files whose id has no line in the eval
	// config; the official evaluator skips them too.
	Ignored []string `json:"-"`
	// Missing lists the gold instances with no prediction. EX above is the
	// official evaluator's (over the predictions present); ExAllGold scores
	// the missing ones as wrong, over all Gold instances.
	Missing   []string `json:"missing"`
	Gold      int      `json:"gold"`
	EXAllGold float64  `json:"ex_all_gold"`
}

// Evaluate scores every prediction whose instance has an eval config line.
// Like the official evaluator, any failure on an instance scores 0 and is
// recorded; only problems with the folders themselves return an error.
func Evaluate(ctx context.Context, cfg Config) (*Report, error) {
	specPath, err := dataset.FindSpecFile(cfg.GoldDir)
	if err != nil {
		return nil, err
	}
	specs, err := dataset.LoadSpecs(specPath)
	if err != nil {
		return nil, err
	}
	resultDir := filepath.Join(cfg.GoldDir, "exec_result")
	if st, err := os.Stat(resultDir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("gold folder %s has no exec_result/ directory of gold CSVs", cfg.GoldDir)
	}
	ext := ".csv"
	if cfg.Mode == ModeSQL {
		ext = ".sql"
		if cfg.Runner == nil {
			return nil, errors.New("sql mode executes the predictions and needs the dataset (--dataset DIR)")
		}
	}
	entries, err := os.ReadDir(cfg.PredDir)
	if err != nil {
		return nil, fmt.Errorf("prediction folder: %w", err)
	}
	rep := &Report{}
	// The gold folder is listed once for every prediction.
	golds := dataset.NewGoldIndex(resultDir)
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ext) {
			continue
		}
		id := strings.TrimSuffix(e.Name(), ext)
		spec, ok := specs[id]
		if !ok {
			rep.Ignored = append(rep.Ignored, e.Name())
			continue
		}
		s := InstanceScore{InstanceID: id}
		ok, err := scoreOne(ctx, cfg, golds, filepath.Join(cfg.PredDir, e.Name()), id, spec)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			s.Error = err.Error()
		case ok:
			s.Score = 1
		default:
			s.Error = "result mismatch: the prediction does not match any gold result"
		}
		rep.Instances = append(rep.Instances, s)
	}
	sort.Slice(rep.Instances, func(i, j int) bool { return rep.Instances[i].InstanceID < rep.Instances[j].InstanceID })
	for _, s := range rep.Instances {
		rep.Correct += s.Score
	}
	rep.Total = len(rep.Instances)
	if rep.Total > 0 {
		rep.EX = float64(rep.Correct) / float64(rep.Total)
	}
	scored := map[string]bool{}
	for _, s := range rep.Instances {
		scored[s.InstanceID] = true
	}
	rep.Missing = []string{}
	for id := range specs {
		if !scored[id] {
			rep.Missing = append(rep.Missing, id)
		}
	}
	sort.Strings(rep.Missing)
	rep.Gold = len(specs)
	if rep.Gold > 0 {
		rep.EXAllGold = float64(rep.Correct) / float64(rep.Gold)
	}
	return rep, nil
}

func scoreOne(ctx context.Context, cfg Config, golds *dataset.GoldIndex, predPath, id string, spec dataset.Spec) (bool, error) {
	lim := cfg.Limits.withDefaults()
	var pred *Frame
	if cfg.Mode == ModeSQL {
		text, err := readBounded(predPath, lim.MaxBytes, errors.New("prediction file too large"))
		if err != nil {
			return false, err
		}
		if pred, err = executePrediction(ctx, cfg.Runner, id, string(text), cfg.ResultLimits, lim); err != nil {
			return false, err
		}
	} else {
		data, err := readBounded(predPath, lim.MaxBytes, ErrTooLarge)
		if err != nil {
			return false, err
		}
		if pred, err = readCSVText(string(data), lim); err != nil {
			return false, fmt.Errorf("prediction %s: %w", filepath.Base(predPath), err)
		}
	}
	files, single, err := golds.Files(id)
	if err != nil {
		return false, err
	}
	return scoreAgainstFiles(pred, files, single, spec, lim)
}

var sqlFence = regexp.MustCompile("(?s)```sql\n(.*?)\n```")

// PredictionSQL extracts the query from a .sql prediction: the first
// ```sql fenced block if there is one, else the whole file.
func PredictionSQL(text string) string {
	if m := sqlFence.FindStringSubmatch(text); m != nil {
		return strings.TrimSpace(m[1])
	}
	return text
}

// executePrediction runs the SQL and reads its result back through CSV, as
// the official sql mode does, so types follow the same pandas rules. A
// result cut by the warehouse's limits scores 0: comparing its first rows
// would judge a different table.
func executePrediction(ctx context.Context, r SQLRunner, id, text string, resLim warehouse.Limits, lim Limits) (*Frame, error) {
	res, dialect, err := r.RunInstanceSQL(ctx, id, PredictionSQL(text))
	if err != nil {
		return nil, err
	}
	if res.Truncated {
		return nil, truncatedError(res, resLim, "the prediction")
	}
	if dialect != warehouse.SQLite && res.RowCount() == 0 {
		// The official BigQuery and Snowflake paths score an empty result 0.
		return nil, errors.New("no data found: the query returned no rows")
	}
	return FrameFromResultLimited(res, lim)
}

// FrameFromResult renders a query result to CSV and reads it back, which is
// how both the evaluator and ReFoRCE's vote see a result. It works within
// the default Limits.
func FrameFromResult(res *warehouse.Result) (*Frame, error) {
	return FrameFromResultLimited(res, Limits{})
}

// FrameFromResultLimited is FrameFromResult within lim: the rendering stops
// as soon as the CSV passes lim.MaxBytes.
func FrameFromResultLimited(res *warehouse.Result, lim Limits) (*Frame, error) {
	lim = lim.withDefaults()
	cells := int64(len(res.Columns)) * int64(max(len(res.Rows), 1))
	if lim.cellsOver(cells) {
		return nil, fmt.Errorf("%w: %d columns × %d rows = %d cells (limit %d cells)", ErrTooLarge, len(res.Columns), len(res.Rows), cells, lim.MaxCells)
	}
	var b strings.Builder
	if err := res.WriteCSV(&limitWriter{w: &b, n: lim.MaxBytes}); err != nil {
		if errors.Is(err, errWriteLimit) {
			return nil, fmt.Errorf("%w: %d rows render to more than %d bytes of CSV (limit %d bytes)", ErrTooLarge, len(res.Rows), lim.MaxBytes, lim.MaxBytes)
		}
		return nil, err
	}
	return readCSVText(b.String(), lim)
}
