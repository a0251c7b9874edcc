package eval

import (
	"context"
	"errors"
	"fmt"
	"github.com/quorumsql/quorum/pkg/dataset"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

func TestReadCSVLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		csv  string
		lim  Limits
		want string // "" = no error
	}{
		{"within every limit", "a,b\n1,2\n3,4\n", Limits{MaxBytes: 100, MaxCells: 4}, ""},
		{"bytes over", "a,b\n1,2\n3,4\n", Limits{MaxBytes: 10}, "result too large: 12 bytes of CSV (limit 10 bytes)"},
		{"fields over", "a,b\n1,2\n3,4\n", Limits{MaxCells: 3}, "result too large: more than 3 fields in the first 3 lines (limit 3 cells)"},
		{"short rows are padded, so they count whole", "a,b,c,d\n1\n2\n", Limits{MaxCells: 7}, "4 columns × 2 rows read so far = 8 cells (limit 7 cells)"},
		{"a wide header alone counts", "a,b,c,d,e\n", Limits{MaxCells: 4}, "more than 4 fields in the header (limit 4 cells)"},
		{"fields beyond the header count while read", "a\n1,2,3,4,5,6\n", Limits{MaxCells: 5}, "more than 5 fields in the first 2 lines"},
		{"the header is not a row", "a,b,c,d\n1,2,3,4\n", Limits{MaxCells: 4}, ""},
		{"negative means no limit", "a,b\n1,2\n3,4\n", Limits{MaxBytes: -1, MaxCells: -1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadCSVLimited([]byte(tt.csv), tt.lim)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrTooLarge)):
				t.Fatalf("err = %v, want ErrTooLarge with %q", err, tt.want)
			}
		})
	}
	// The default limits apply to ReadCSV itself.
	if _, err := ReadCSV(wideHeaderCSV(1_500_000)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadCSV of a padded 10^11-cell table: %v, want ErrTooLarge", err)
	}
}

// wideHeaderCSV is about size bytes: half a header of one-letter columns,
// half one-field rows, which pandas pads to the header's width.
func wideHeaderCSV(size int) []byte {
	var b strings.Builder
	for b.Len() < size/2 {
		b.WriteString("a,")
	}
	b.WriteString("a\n")
	for b.Len() < size {
		b.WriteString("1\n")
	}
	return []byte(b.String())
}

// alikeCSV is a cols × rows table of 1s whose last row holds last(c) in
// column c: its columns differ only in their last value.
func alikeCSV(cols, rows int, last func(c int) string) []byte {
	var b strings.Builder
	writeHeader(&b, cols)
	for r := range rows {
		for c := range cols {
			if c > 0 {
				b.WriteByte(',')
			}
			if r == rows-1 {
				b.WriteString(last(c))
			} else {
				b.WriteByte('1')
			}
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// TestHostileCSVIsBounded scores 1.5 MB hostile predictions through the
// whole exec_result pipeline and records what each costs (not in parallel:
// it measures the process's allocations). Before the
// limits, the wide header needed 2 TB (the process died out of memory) and
// the alike columns 8 s and 190-320 MB each.
func TestHostileCSVIsBounded(t *testing.T) {
	const cols, rows = 1500, 500 // 1.5 MB
	fwd := func(c int) string { return fmt.Sprint(c + 2) }
	rev := func(c int) string { return fmt.Sprint(cols - c + 1) }
	// Within tolerance of rev, so only a value comparison finds it.
	near := func(c int) string { return fmt.Sprintf("%d.001", cols-c+1) }
	tests := []struct {
		name        string
		pred, gold  []byte
		ignoreOrder bool
		score       int
		wantErr     string
		maxAlloc    uint64
	}{
		{"wide header over one-field rows", wideHeaderCSV(1_500_000), []byte("a\n1\n"), false, 0,
			"result too large: 375001 columns × 14 rows read so far = 5250014 cells (limit 5000000 cells)", 32 << 20},
		{"many alike columns, gold the same in reverse order", alikeCSV(cols, rows, fwd), alikeCSV(cols, rows, rev), true, 1, "", 256 << 20},
		{"many alike columns, gold near them in reverse order", alikeCSV(cols, rows, fwd), alikeCSV(cols, rows, near), false, 0,
			"value comparisons (limit 500000000)", 256 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gold, pred := t.TempDir(), t.TempDir()
			writeFiles(t, gold, map[string]string{
				"x_eval.jsonl":      fmt.Sprintf(`{"instance_id": "h", "condition_cols": null, "ignore_order": %v}`, tt.ignoreOrder),
				"exec_result/h.csv": string(tt.gold),
			})
			writeFiles(t, pred, map[string]string{"h.csv": string(tt.pred)})
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			rep, err := Evaluate(context.Background(), Config{GoldDir: gold, PredDir: pred, Mode: ModeExecResult})
			elapsed := time.Since(start) //clock:ok logged, not asserted
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			alloc, mallocs := after.TotalAlloc-before.TotalAlloc, after.Mallocs-before.Mallocs
			t.Logf("%d-byte prediction: %v, TotalAlloc %.1f MB, %d allocations", len(tt.pred), elapsed, float64(alloc)/(1<<20), mallocs)
			s := rep.Instances[0]
			if s.Score != tt.score || !strings.Contains(s.Error, tt.wantErr) {
				t.Errorf("score %d error %q, want %d and %q", s.Score, s.Error, tt.score, tt.wantErr)
			}
			if alloc > tt.maxAlloc {
				t.Errorf("allocated %d MB, want at most %d MB", alloc>>20, tt.maxAlloc>>20)
			}
		})
	}
}

func TestCompareBudget(t *testing.T) {
	t.Parallel()
	// 4 gold columns, each matched only by the last of 4 predicted columns
	// that differ from it in their last of 3 values.
	pred, _ := ReadCSV([]byte("a,b,c,d\n1,1,1,1\n1,1,1,1\n5,6,7,8\n"))
	near, _ := ReadCSV([]byte("a,b,c,d\n1,1,1,1\n1,1,1,1\n8.001,7.001,6.001,5.001\n"))
	same, _ := ReadCSV([]byte("a,b,c,d\n1,1,1,1\n1,1,1,1\n8,7,6,5\n"))
	tests := []struct {
		name    string
		gold    *Frame
		limit   int64
		want    bool
		wantErr bool
	}{
		// Gold column k is found at predicted column 4-k: 3 values × (4+3+2+1) pairs.
		{"near columns within the budget", near, 30, true, false},
		{"near columns beyond the budget", near, 29, false, true},
		{"identical columns cost no comparison", same, 1, true, false},
		{"no limit", near, -1, true, false},
	}
	for _, tt := range tests {
		ok, err := CompareGoldLimited(pred, []*Frame{tt.gold}, true, dataset.Conditions{}, false, Limits{MaxCompare: tt.limit})
		if ok != tt.want || (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrTooLarge)) {
			t.Errorf("%s: %v, %v; want %v, error %v", tt.name, ok, err, tt.want, tt.wantErr)
		}
	}
}

// TestDuplicateConditionColumns: a condition naming one column 10^6 times
// is one column, not 10^6 copies of it.
func TestDuplicateConditionColumns(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	pred, _ := ReadCSV([]byte("x\n1\n2\n"))
	gold, _ := ReadCSV([]byte("a,b\n1,7\n2,8\n"))
	cond := dataset.ConditionsOf(slices.Repeat([]int{0}, 1_000_000))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ok, err := CompareGold(pred, []*Frame{gold}, true, cond, false)
	runtime.ReadMemStats(&after)
	if !ok || err != nil {
		t.Fatalf("%v, %v; want a match", ok, err)
	}
	// The condition itself (10^6 JSON numbers) costs tens of MB to decode;
	// a million prepared columns would cost far more.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("TotalAlloc %.1f MB", float64(alloc)/(1<<20))
	if alloc > 128<<20 {
		t.Errorf("allocated %d MB", alloc>>20)
	}
	if _, err := CompareGold(pred, []*Frame{gold}, true, dataset.ConditionsOf([]int{0, 0, 5}), false); err == nil {
		t.Error("an out-of-range position among duplicates must still fail")
	}
}

// referenceCovered is the column match as written before the limits:
// whole PyValue vectors, prepared per pair, every pair compared.
func referenceCovered(want, have *Frame, o matchOptions) bool {
	prep := func(v []PyValue) []PyValue {
		out := slices.Clone(v)
		for i := range out {
			if o.nanToZero && out[i].IsNaN() {
				out[i] = Int(0)
			}
		}
		if o.ignoreOrder {
			sortVector(out)
		}
		return out
	}
	match := func(a, b []PyValue) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			x, y := a[i], b[i]
			if !o.nanToZero && x.IsNaN() && y.IsNaN() {
				continue
			}
			if x.IsNumber() && y.IsNumber() {
				if !isClose(x.Float64(), y.Float64(), 1e-9, o.absTol) {
					return false
				}
				continue
			}
			if x.Kind != PyStr || y.Kind != PyStr || x.S != y.S {
				return false
			}
		}
		return true
	}
	for _, w := range want.Vectors() {
		found := false
		for _, h := range have.Vectors() {
			if match(prep(w), prep(h)) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// randomCSV is a small table over values chosen to sit on the rules'
// edges: tolerance, int/float/bool/text kinds, missing cells, sort keys.
func randomCSV(r *rand.Rand, cols, rows int, from [][]string) (string, [][]string) {
	values := []string{"0", "1", "2", "10", "1.0", "1.005", "1.02", "0.5", "2.0001", "x", "1", "a b", "", "true", "false", "NA", "1e3", "-0"}
	out := make([][]string, cols)
	for c := range out {
		if len(from) > 0 && r.IntN(2) == 0 {
			out[c] = slices.Clone(from[r.IntN(len(from))])
			if r.IntN(3) == 0 {
				r.Shuffle(len(out[c]), func(i, j int) { out[c][i], out[c][j] = out[c][j], out[c][i] })
			}
			if len(out[c]) > 0 && r.IntN(3) == 0 {
				out[c][r.IntN(len(out[c]))] = values[r.IntN(len(values))]
			}
			continue
		}
		out[c] = make([]string, rows)
		for i := range out[c] {
			out[c][i] = values[r.IntN(len(values))]
		}
	}
	var b strings.Builder
	writeHeader(&b, cols)
	for i := range rows {
		for c := range cols {
			if c > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q", out[c][i])
		}
		b.WriteByte('\n')
	}
	return b.String(), out
}

// TestMatchAgreesWithReference: the prepared, hashed and budgeted match
// gives the verdicts of the plain one on thousands of random tables, for
// the evaluator's options and the vote's.
func TestMatchAgreesWithReference(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 3000 {
		rows := r.IntN(5) + 1
		goldText, goldCols := randomCSV(r, r.IntN(3)+1, rows, nil)
		predText, _ := randomCSV(r, r.IntN(4)+1, rows, goldCols)
		gold, err := ReadCSV([]byte(goldText))
		if err != nil {
			t.Fatal(err)
		}
		pred, err := ReadCSV([]byte(predText))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []matchOptions{evalOptions(false), evalOptions(true), voteOptions} {
			want := referenceCovered(gold, pred, o)
			got, err := everyColumnMatched(prepareFrame(gold, o), prepareFrame(pred, o), o, newBudget(-1))
			if err != nil || got != want {
				t.Fatalf("case %d %+v: %v (%v), reference %v\ngold:\n%s\npred:\n%s", n, o, got, err, want, goldText, predText)
			}
		}
	}
}

// truncatingRunner answers every query with a result cut by its limits,
// except "SELECT 1".
type truncatingRunner struct{ by string }

func (r truncatingRunner) RunInstanceSQL(_ context.Context, _, sql string) (*warehouse.Result, warehouse.Dialect, error) {
	res := &warehouse.Result{Columns: []warehouse.Column{{Name: "n"}}, Rows: [][]warehouse.Value{{warehouse.IntValue(1)}}}
	if strings.TrimSpace(sql) != "SELECT 1" {
		res.Truncated, res.TruncatedBy, res.Bytes = true, r.by, 8
	}
	return res, warehouse.SQLite, nil
}

// TestEvaluateSQLResultTooLarge: a result cut by the warehouse's limits
// scores 0 as too large (its first rows are not compared) and the other
// predictions are still scored.
func TestEvaluateSQLResultTooLarge(t *testing.T) {
	t.Parallel()
	gold := t.TempDir()
	writeFiles(t, gold, map[string]string{
		"x_eval.jsonl":        "{\"instance_id\": \"ok\"}\n{\"instance_id\": \"big\"}\n",
		"exec_result/ok.csv":  "n\n1\n",
		"exec_result/big.csv": "n\n1\n",
	})
	pred := t.TempDir()
	writeFiles(t, pred, map[string]string{"ok.sql": "SELECT 1", "big.sql": "SELECT n FROM endless"})
	lim := warehouse.Limits{MaxRows: 1, MaxBytes: 8}
	tests := []struct{ by, want string }{
		{"rows", "result too large: the prediction returned more than 1 rows (limit 1 rows)"},
		{"bytes", "result too large: the prediction returned more than 8 bytes of values after 1 rows (limit 8 bytes)"},
		{"memory", "result too large: the prediction's result was cut at a memory limit after 1 rows"},
	}
	for _, tt := range tests {
		rep, err := Evaluate(context.Background(), Config{GoldDir: gold, PredDir: pred, Mode: ModeSQL, Runner: truncatingRunner{tt.by}, ResultLimits: lim})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Instances) != 2 || rep.Instances[0].InstanceID != "big" || rep.Instances[0].Score != 0 ||
			!strings.Contains(rep.Instances[0].Error, tt.want) || rep.Instances[1].Score != 1 || rep.Correct != 1 {
			t.Errorf("cut by %s: %+v, want big scored 0 with %q and ok scored 1", tt.by, rep.Instances, tt.want)
		}
	}

	// BIRD's sql mode: the same for the prediction and for the gold SQL.
	tasks := []BirdTask{{InstanceID: "ok", GoldSQL: "SELECT 1"}, {InstanceID: "big", GoldSQL: "SELECT 1"}, {InstanceID: "gold", GoldSQL: "SELECT n FROM endless"}}
	writeFiles(t, pred, map[string]string{"gold.sql": "SELECT 1"})
	rep, err := EvaluateBird(context.Background(), BirdConfig{Tasks: tasks, PredDir: pred, Mode: ModeSQL, Runner: truncatingRunner{"rows"}, ResultLimits: lim})
	if err != nil {
		t.Fatal(err)
	}
	want := []InstanceScore{
		{InstanceID: "big", Error: "result too large: the prediction returned more than 1 rows (limit 1 rows); aggregate, filter or add a LIMIT"},
		{InstanceID: "gold", Error: "gold SQL: result too large: the query returned more than 1 rows (limit 1 rows); aggregate, filter or add a LIMIT"},
		{InstanceID: "ok", Score: 1},
	}
	if !slices.Equal(rep.Instances, want) {
		t.Errorf("BIRD: %+v, want %+v", rep.Instances, want)
	}
}

func TestFrameFromResultLimited(t *testing.T) {
	t.Parallel()
	res := &warehouse.Result{Columns: []warehouse.Column{{Name: "a"}, {Name: "b"}}}
	for i := range 100 {
		res.Rows = append(res.Rows, []warehouse.Value{warehouse.IntValue(int64(i)), warehouse.TextValue("some text")})
	}
	tests := []struct {
		lim  Limits
		want string
	}{
		{Limits{}, ""},
		{Limits{MaxCells: 199}, "result too large: 2 columns × 100 rows = 200 cells (limit 199 cells)"},
		{Limits{MaxBytes: 1000}, "result too large: 100 rows render to more than 1000 bytes of CSV (limit 1000 bytes)"},
	}
	for _, tt := range tests {
		f, err := FrameFromResultLimited(res, tt.lim)
		switch {
		case tt.want == "" && (err != nil || f.Rows != 100):
			t.Errorf("%+v: %v", tt.lim, err)
		case tt.want != "" && (err == nil || err.Error() != tt.want):
			t.Errorf("%+v: err = %v, want %q", tt.lim, err, tt.want)
		}
	}
}

// TestLargeFilesAreNotRead: a gold or predicted file beyond MaxBytes is
// refused by its size, and the error names it.
func TestLargeFilesAreNotRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "g.csv")
	if err := os.WriteFile(path, []byte("a\n1\n2\n3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadCSVFileLimited(path, Limits{MaxBytes: 4})
	if want := "result too large: " + path + " is 8 bytes (limit 4 bytes)"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	if f, err := ReadCSVFileLimited(path, Limits{MaxBytes: 8}); err != nil || f.Rows != 3 {
		t.Errorf("at the limit: %v", err)
	}
}

// writeHeader writes the header c0,c1,… of a cols-column CSV.
func writeHeader(b *strings.Builder, cols int) {
	for c := range cols {
		if c > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(b, "c%d", c)
	}
	b.WriteByte('\n')
}
