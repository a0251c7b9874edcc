package outputs

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/quorumsql/quorum/pkg/dataset"
)

// The table's preview of an answer: enough rows and columns to recognise
// it, few enough that 547 examples keep the page light.
const (
	previewRows  = 5
	previewCols  = 12
	previewCell  = 80
	previewBytes = 16 << 10
	maxSQLBytes  = 16 << 10
)

// tableRow is one example in the report's table of every example (the
// JSON the page's script renders; short keys keep the page small).
type tableRow struct {
	ID         string  `json:"id"`
	Question   string  `json:"q,omitempty"`
	Database   string  `json:"db"`
	Dialect    string  `json:"dialect"`
	Status     string  `json:"status"`
	Confidence string  `json:"conf,omitempty"`
	Method     string  `json:"method,omitempty"`
	Correct    *bool   `json:"correct,omitempty"`
	Calls      int     `json:"calls"`
	Tokens     int     `json:"tokens"`
	Money      float64 `json:"money,omitempty"`
	Latency    float64 `json:"latency"`
	Error      string  `json:"error,omitempty"`
	// Gold says how the answer compared with the gold result, in words;
	// GoldDiff, for a wrong answer, the gold SQL and rows against it.
	Gold     string    `json:"gold,omitempty"`
	GoldDiff *GoldDiff `json:"gd,omitempty"`
	// SQL is the final answer's SQL and Columns/Rows the first rows of
	// its result, when the run's folder holds them; More says the result
	// had more rows than shown.
	SQL     string     `json:"sql,omitempty"`
	Columns []string   `json:"cols,omitempty"`
	Rows    [][]string `json:"rows,omitempty"`
	More    bool       `json:"more,omitempty"`
	// Page links the example's trace page, when one was written.
	Page string `json:"page,omitempty"`
}

// tableData is the table's JSON: its rows and whether money is shown.
type tableData struct {
	Priced bool       `json:"priced"`
	Rows   []tableRow `json:"rows"`
}

// exampleTable builds the table of every example of r, in r's order.
// dir is the run's output folder, where each answered example's <id>.sql
// and <id>.csv are read ("" for none: a benchmark's runs are gone).
func exampleTable(r *Report, dir string, pages map[string]bool) tableData {
	out := tableData{Priced: r.Totals.Cost.Money() > 0, Rows: make([]tableRow, 0, len(r.Examples))}
	for _, e := range r.Examples {
		row := tableRow{ID: e.InstanceID, Question: e.Question, Database: e.Database, Dialect: e.Dialect, Status: e.Status,
			Confidence: e.Confidence, Method: e.Method, Correct: e.Correct, Calls: e.Cost.LLMCalls, Tokens: e.Cost.Tokens(),
			Money: e.Cost.Money(), Latency: e.LatencySeconds, Error: e.Error, Gold: goldWhy(e, cmp.Or(e.Candidates, r.Totals.KOrVotes(r.Votes))), GoldDiff: e.Gold}
		if pages[e.InstanceID] {
			row.Page = ExamplesDir + "/" + PageFile(e.InstanceID)
		}
		if dir != "" && e.Status == "answered" && dataset.CheckName(e.InstanceID) == nil {
			row.SQL = readSQL(filepath.Join(dir, e.InstanceID+".sql"))
			row.Columns, row.Rows, row.More = readPreview(filepath.Join(dir, e.InstanceID+".csv"))
		}
		out.Rows = append(out.Rows, row)
	}
	return out
}

// goldWhy says in words how an example's answer compared with the gold
// result ("" when it was not scored); k is the example's candidates.
func goldWhy(e Example, k int) string {
	if e.Correct == nil {
		return ""
	}
	how := "as Spider 2.0's evaluator compares them (the gold's columns found among the answer's)"
	if e.Metric == "bird" {
		how = "as BIRD's execution accuracy compares them (the same set of rows)"
	}
	var s string
	switch {
	case e.Status == "failed":
		s = "Wrong: the pipeline failed, so there was no answer to compare with the gold result."
	case e.Status == "no_answer":
		s = "Wrong: no candidate produced rows, so there was no answer to compare with the gold result."
	case *e.Correct:
		return "Right: the answer's result matches the gold result, " + how + "."
	default:
		s = "Wrong: the answer's result differs from the gold result, " + how + "."
	}
	if e.CorrectAtK != nil {
		if *e.CorrectAtK {
			s += fmt.Sprintf(" One of the %d candidates did match it: a better choice among them would have been right.", k)
		} else {
			s += fmt.Sprintf(" None of the %d candidates matched it.", k)
		}
	}
	return s
}

// readSQL reads an answer's SQL, cut at maxSQLBytes ("" when absent).
func readSQL(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxSQLBytes+1))
	s := strings.TrimSpace(string(b))
	if len(b) > maxSQLBytes {
		s = strings.ToValidUTF8(s[:maxSQLBytes], "") + "\n-- … (cut: the SQL is longer)"
	}
	return s
}

// readPreview reads the header and first rows of an answer's CSV, each
// cell cut short; more says rows were left out.
func readPreview(path string) (cols []string, rows [][]string, more bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, false
	}
	defer f.Close()
	cr := csv.NewReader(bufio.NewReader(io.LimitReader(f, previewBytes)))
	cr.FieldsPerRecord, cr.LazyQuotes, cr.ReuseRecord = -1, true, false
	cut := func(rec []string) []string {
		out := make([]string, 0, min(len(rec), previewCols))
		for _, c := range rec[:min(len(rec), previewCols)] {
			if r := []rune(c); len(r) > previewCell {
				c = string(r[:previewCell-1]) + "…"
			}
			out = append(out, c)
		}
		return out
	}
	head, err := cr.Read()
	if err != nil {
		return nil, nil, false
	}
	cols = cut(head)
	for {
		rec, err := cr.Read()
		if err != nil {
			// A cut-off last record still counts as more rows.
			return cols, rows, more || err != io.EOF
		}
		if len(rows) == previewRows {
			return cols, rows, true
		}
		rows = append(rows, cut(rec))
	}
}

// tableJSON is the table's data as JSON for a <script type="application/json">
// element: json.Marshal escapes <, > and &, so no text in it can end the
// element.
func tableJSON(d tableData) (string, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return "", fmt.Errorf("the table of examples: %w", err)
	}
	return string(b), nil
}

// dialectsAndDatabases are the filter's choices, sorted.
func dialectsAndDatabases(r *Report) (dialects, dbs []string) {
	for _, e := range r.Examples {
		dialects, dbs = append(dialects, e.Dialect), append(dbs, e.Database)
	}
	slices.Sort(dialects)
	slices.Sort(dbs)
	return slices.Compact(dialects), slices.Compact(dbs)
}
