package serve

import (
	"context"
	"encoding/csv"
	"slices"
	"strings"
	"testing"
)

// TestResultCSVIsInert: result.csv's cells that a spreadsheet would
// evaluate (=, +, -, @, tab, CR first) come out as text, through the
// handler over a real Redis; numbers stay numbers.
func TestResultCSVIsInert(t *testing.T) {
	s, _ := redisServer(t, HTTPLimits{})
	ctx := context.Background()
	id := storeQuestion(t, s, "a")
	hostile := []string{`=HYPERLINK("http://evil","x")`, `+cmd|' /C calc'!A0`, `-2+3+cmd|' /C calc'!A0`, `@SUM(A1:A9)`, "\t=1+1", "\r=1+1", "-7", "+1.5", "3", "plain", ""}
	want := []string{`'=HYPERLINK("http://evil","x")`, `'+cmd|' /C calc'!A0`, `'-2+3+cmd|' /C calc'!A0`, `'@SUM(A1:A9)`, "'\t=1+1", "'\r=1+1", "-7", "+1.5", "3", "plain", ""}
	if _, _, err := s.store.update(ctx, id, func(q *Question) {
		q.Status, q.Columns, q.Rows = Answered, []string{"=col", "n"}, nil
		for _, c := range hostile {
			q.Rows = append(q.Rows, []string{c, "1"})
		}
	}); err != nil {
		t.Fatal(err)
	}
	w := request(t, s.Handler(), "GET", "/v1/questions/"+id+"/result.csv", keyA, "")
	if w.Code != 200 {
		t.Fatalf("result.csv: %d %s", w.Code, w.Body)
	}
	rows, err := csv.NewReader(strings.NewReader(w.Body.String())).ReadAll()
	if err != nil {
		t.Fatalf("result.csv is not CSV: %v\n%s", err, w.Body)
	}
	if len(rows) != len(hostile)+1 || !slices.Equal(rows[0], []string{"'=col", "n"}) {
		t.Fatalf("result.csv: %q, want a header ['=col n] and %d rows", rows, len(hostile))
	}
	for i, row := range rows[1:] {
		if row[0] != want[i] {
			t.Errorf("cell %q came out as %q, want %q", hostile[i], row[0], want[i])
		}
	}
}
