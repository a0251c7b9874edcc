package dataset

import (
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

func TestWithQuestions(t *testing.T) {
	t.Parallel()
	ds, err := Load("../../examples/demo", Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := Question{ID: "q1", DB: "shop", Dialect: sqltext.SQLite, Question: "How many customers?"}
	got, err := ds.WithQuestions(q)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := got.Example("q1")
	if !ok || len(got.Examples) != 1 || e.Question != q.Question {
		t.Fatalf("examples %v", got.Examples)
	}
	if db, ok := got.Database(e); !ok || db.SQLitePath == "" {
		t.Errorf("the question's database is not the dataset's: %+v", db)
	}
	if len(ds.Examples) == 1 {
		t.Error("the dataset itself changed")
	}
	for _, tt := range []struct {
		edit func(*Question)
		want string
	}{
		{func(q *Question) { q.DB = "nope" }, "db: "},
		{func(q *Question) { q.Dialect = sqltext.BigQuery }, "db: "},
		{func(q *Question) { q.ID = "../x" }, "id "},
		{func(q *Question) { q.Question = "  " }, "question: empty"},
		{func(q *Question) { q.Question = strings.Repeat("x", MaxQuestionBytes+1) }, "question: "},
		{func(q *Question) { q.ExternalKnowledge = strings.Repeat("x", MaxKnowledgeBytes+1) }, "external_knowledge: "},
	} {
		bad := q
		tt.edit(&bad)
		if _, err := ds.WithQuestions(bad); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an error naming %q", bad, err, tt.want)
		}
	}
}
