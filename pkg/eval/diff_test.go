package eval

import (
	"fmt"
	"strings"
	"testing"
)

func TestDiffRows(t *testing.T) {
	frame := func(csv string) *Frame {
		t.Helper()
		f, err := ReadCSV([]byte(csv))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	tests := []struct {
		name, answer, gold string
		// found: the answer column for each gold column; missing, extra:
		// the rows listed, "|"-joined.
		found            string
		missing, extra   []string
		nMissing, nExtra int
	}{
		{
			name:   "a row missing, columns renamed and reordered, one more column",
			answer: "total,who,note\n10.0,ann,x\n20.004,bob,y\n",
			gold:   "customer,amount\nann,10\nbob,20\ncid,30\n",
			found:  "who,total", missing: []string{"cid|30"}, nMissing: 1,
		},
		{
			name:   "a row too many, one row differs",
			answer: "name,n\na,1\nb,2\nb,2\n",
			gold:   "name,n\na,1\nb,3\n",
			found:  "name,n", missing: []string{"b|3"}, extra: []string{"b|2", "b|2"}, nMissing: 1, nExtra: 2,
		},
		{
			name:   "no column in common",
			answer: "x\nq\n",
			gold:   "y\n1\n",
			found:  "",
		},
		{
			name:   "the same rows in another order",
			answer: "a,b\n2,y\n1,x\n",
			gold:   "a,b\n1,x\n2,y\n",
			found:  "a,b",
		},
	}
	join := func(rows [][]string) []string {
		var out []string
		for _, r := range rows {
			out = append(out, strings.Join(r, "|"))
		}
		return out
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DiffRows(frame(tt.answer), frame(tt.gold), 10)
			if got := strings.Join(d.Found, ","); strings.Trim(got, ",") != tt.found {
				t.Errorf("answer columns found %q, want %q", got, tt.found)
			}
			if fmt.Sprint(join(d.Missing)) != fmt.Sprint(tt.missing) || fmt.Sprint(join(d.Extra)) != fmt.Sprint(tt.extra) {
				t.Errorf("missing %v, extra %v; want %v, %v", join(d.Missing), join(d.Extra), tt.missing, tt.extra)
			}
			if d.MissingCount != tt.nMissing || d.ExtraCount != tt.nExtra {
				t.Errorf("counts missing %d, extra %d; want %d, %d", d.MissingCount, d.ExtraCount, tt.nMissing, tt.nExtra)
			}
		})
	}
	// The listed rows stop at the limit; the counts do not.
	d := DiffRows(frame("n\n1\n"), frame("n\n1\n2\n3\n4\n"), 2)
	if len(d.Missing) != 2 || d.MissingCount != 3 {
		t.Errorf("limit 2: %d rows listed of %d missing, want 2 of 3", len(d.Missing), d.MissingCount)
	}
}
