package serve

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/quorumsql/quorum/pkg/dataset"
)

// pathDatabase finds the database a path names ({db}, ?dialect=), or
// answers 404 or 400.
func (s *Server) pathDatabase(w http.ResponseWriter, r *http.Request) (*Database, bool) {
	name, dialect := r.PathValue("db"), r.URL.Query().Get("dialect")
	db, n := s.database(name, dialect)
	switch {
	case n == 0:
		writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("no database %q (GET /v1/databases lists them)", name)})
		return nil, false
	case n > 1:
		badField(w, "dialect", "database %q exists in several dialects: name one", name)
		return nil, false
	}
	return db, true
}

// schemaTable is one table of GET /v1/databases/{db}/schema.
type schemaTable struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Columns     []schemaColumn `json:"columns"`
}

type schemaColumn struct {
	Name        string `json:"name"`
	Type        string `json:"type,omitempty"`
	Description string `json:"description,omitempty"`
}

// tablesOf reads a database's tables, in the schema's order.
func tablesOf(db *dataset.Database) ([]schemaTable, error) {
	sc, _, err := dataset.LoadSchema(db)
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", db.Name, err)
	}
	tables := []schemaTable{}
	for _, f := range sc.Folders {
		for _, t := range f.Tables {
			st := schemaTable{Name: t.Name, Description: t.Description, Columns: []schemaColumn{}}
			for _, c := range t.Columns {
				st.Columns = append(st.Columns, schemaColumn{Name: c.Name, Type: c.Type, Description: c.Description})
			}
			tables = append(tables, st)
		}
	}
	return tables, nil
}

// databaseSchema is the schema browser's data: the tables and columns.
func (s *Server) databaseSchema(w http.ResponseWriter, r *http.Request) {
	db, ok := s.pathDatabase(w, r)
	if !ok {
		return
	}
	tables, err := tablesOf(db.db)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"db": db.Name, "dialect": db.Dialect, "tables": tables})
}

// exampleCache holds each database's example questions, made once.
type exampleCache struct {
	mu   sync.Mutex
	byDB map[string]exampleSet
}

// exampleSet is GET /v1/databases/{db}/examples: the questions and where
// they came from ("dataset": the simulator's questions, the only ones it
// answers; "schema": written from the tables and columns).
type exampleSet struct {
	Questions []string `json:"questions"`
	Source    string   `json:"source"`
}

// MaxExampleQuestions bounds a database's example questions.
const MaxExampleQuestions = 6

func (s *Server) exampleQuestions(w http.ResponseWriter, r *http.Request) {
	db, ok := s.pathDatabase(w, r)
	if !ok {
		return
	}
	set, err := s.examplesOf(db)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, set)
}

func (s *Server) examplesOf(db *Database) (exampleSet, error) {
	key := db.Dialect + ":" + db.Name
	s.examples.mu.Lock()
	defer s.examples.mu.Unlock()
	if set, ok := s.examples.byDB[key]; ok {
		return set, nil
	}
	var set exampleSet
	if s.sim != nil {
		qs := s.sim.Questions(db.Name)
		set = exampleSet{Questions: qs[:min(len(qs), MaxExampleQuestions)], Source: "dataset"}
	} else {
		tables, err := tablesOf(db.db)
		if err != nil {
			return set, err
		}
		set = exampleSet{Questions: schemaQuestions(tables), Source: "schema"}
	}
	if set.Questions == nil {
		set.Questions = []string{}
	}
	if s.examples.byDB == nil {
		s.examples.byDB = map[string]exampleSet{}
	}
	s.examples.byDB[key] = set
	return set, nil
}

var (
	dateLike    = regexp.MustCompile(`(?i)(date|time|_at$|_on$|month|year|day)`)
	measureLike = regexp.MustCompile(`(?i)(amount|price|total|cost|revenue|quantity|qty|count|value|score|salary|balance|sales)`)
	categoryish = regexp.MustCompile(`(?i)(country|category|type|status|channel|region|city|state|kind|segment|currency|department|brand)`)
	numericType = regexp.MustCompile(`(?i)(int|real|float|double|numeric|decimal|number)`)
)

// schemaQuestions writes questions a database can answer from its
// tables' and columns' names: a count, a measure by a category, a measure
// over time. Plain templates, no model: made once and cached.
func schemaQuestions(tables []schemaTable) []string {
	var out []string
	add := func(q string) {
		if len(out) < MaxExampleQuestions {
			out = append(out, q)
		}
	}
	human := func(s string) string { return strings.ReplaceAll(s, "_", " ") }
	for _, t := range tables {
		var date, measure, category string
		for _, c := range t.Columns {
			switch {
			case date == "" && dateLike.MatchString(c.Name):
				date = c.Name
			case measure == "" && measureLike.MatchString(c.Name) && (c.Type == "" || numericType.MatchString(c.Type)):
				measure = c.Name
			case category == "" && categoryish.MatchString(c.Name) && !strings.HasSuffix(strings.ToLower(c.Name), "_id"):
				category = c.Name
			}
		}
		// One question a table, the most telling its columns allow.
		switch {
		case measure != "" && category != "":
			add(fmt.Sprintf("What is the total %s by %s in %s?", human(measure), human(category), human(t.Name)))
		case measure != "" && date != "":
			add(fmt.Sprintf("What is the total %s in %s per month of %s?", human(measure), human(t.Name), human(date)))
		case category != "":
			add(fmt.Sprintf("How many %s are there for each %s?", human(t.Name), human(category)))
		}
	}
	for _, t := range tables {
		add(fmt.Sprintf("How many %s are there?", human(t.Name)))
	}
	return out
}

// resultCSV is the answer's rows as CSV (those GET returns: at most
// Config.MaxRows).
func (s *Server) resultCSV(w http.ResponseWriter, r *http.Request) {
	q, ok := s.owned(w, r)
	if !ok {
		return
	}
	if q.Status != Answered {
		writeJSON(w, http.StatusConflict, apiError{Error: fmt.Sprintf("question %s is %s: it has no result", q.ID, q.Status)})
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+q.ID+`.csv"`)
	cw := csv.NewWriter(w)
	_ = cw.Write(inertRow(q.Columns))
	for _, row := range q.Rows {
		_ = cw.Write(inertRow(row))
	}
	cw.Flush()
}

// inertRow is row with each cell a spreadsheet would evaluate as a formula
// made inert (inertCell): the cells come from the database and the
// model's SQL, which a tenant or their data's authors choose.
func inertRow(row []string) []string {
	out := make([]string, len(row))
	for i, c := range row {
		out[i] = inertCell(c)
	}
	return out
}

// inertCell prefixes a cell beginning with =, +, -, @, a tab or a carriage
// return with an apostrophe, which spreadsheets show as text (OWASP's CSV
// injection advice); a number, -3 or +1.5e3, is left as it is so that the
// column stays numeric.
func inertCell(c string) string {
	if c == "" || !strings.ContainsRune("=+-@\t\r", rune(c[0])) {
		return c
	}
	if _, err := strconv.ParseFloat(c, 64); err == nil && c[0] != '=' && c[0] != '@' {
		return c
	}
	return "'" + c
}
