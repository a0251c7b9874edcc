package eval

import (
	"encoding/json"
	"github.com/quorumsql/quorum/pkg/dataset"
	"testing"
)

// TestCompareGold pins the official evaluator's verdicts, rule by rule, from
// spider2-formats.md §3.3-3.7.
func TestCompareGold(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		pred        string
		golds       []string // variants in name order; one entry with single=true is <id>.csv
		single      bool
		cond        string // raw condition_cols JSON; "" = absent
		ignoreOrder bool
		want        bool
		wantErr     bool
	}{
		// Reading the CSVs (§3.6).
		{name: "exact match", pred: "a,b\n1,x\n2,y\n", golds: []string{"a,b\n1,x\n2,y\n"}, single: true, want: true},
		{name: "utf-8 BOM dropped", pred: "\xef\xbb\xbfa\nx\n", golds: []string{"a\nx\n"}, single: true, want: true},
		{name: "CRLF line ends", pred: "a,b\r\n1,x\r\n", golds: []string{"a,b\n1,x\n"}, single: true, want: true},
		{name: "lone CR line ends", pred: "a,b\r1,x\r", golds: []string{"a,b\n1,x\n"}, single: true, want: true},
		{name: "quoted newline is one field", pred: "a\n\"x\ny\"\n", golds: []string{"a\n\"x\ny\"\n"}, single: true, want: true},
		{name: "text after closing quote appended", pred: "a\n\"x\"y\n", golds: []string{"a\nxy\n"}, single: true, want: true},
		{name: "space then quote is literal", pred: "a\n \"x\"\n", golds: []string{"a\nx\n"}, single: true, want: false},
		{name: "escaped quotes; mid-field quote literal", pred: "a\n\"say \"\"hi\"\"\"\n", golds: []string{"a\nsay \"hi\"\n"}, single: true, want: true},
		{name: "blank and whitespace lines skipped", pred: "\n  \na\n\nx\n \t \ny\n", golds: []string{"a\nx\ny\n"}, single: true, want: true},
		{name: "empty prediction file errors", pred: "", golds: []string{"a\n1\n"}, single: true, wantErr: true},
		{name: "blank-only prediction errors", pred: "\n \n", golds: []string{"a\n1\n"}, single: true, wantErr: true},
		{name: "trailing commas become the index", pred: "a,b\n1,2,\n3,4,\n", golds: []string{"a,b\n2,\n4,\n"}, single: true, want: true},
		{name: "later row with too many fields errors", pred: "a,b\n1,2\n3,4,5\n", golds: []string{"a,b\n1,2\n3,4\n"}, single: true, wantErr: true},
		{name: "short row padded with NA", pred: "a,b\n1\n2,5\n", golds: []string{"a,b\n1,0\n2,5\n"}, single: true, want: true},
		{name: "None is NA (pandas 2)", pred: "a\nNone\n1\n", golds: []string{"a\n0\n1\n"}, single: true, want: true},
		{name: "spaced NULL is text", pred: "a\n NULL \n", golds: []string{"a\n0\n"}, single: true, want: false},
		{name: "quoted NA spelling still NA", pred: "a\n\"NA\"\n", golds: []string{"a\n0\n"}, single: true, want: true},
		{name: "int with spaces is int", pred: "a\n 5 \n", golds: []string{"a\n5\n"}, single: true, want: true},
		{name: "001 with text stays text", pred: "a\n001\nabc\n", golds: []string{"a\n1\nabc\n"}, single: true, want: false},
		{name: "001 with ints is int", pred: "a\n001\n002\n", golds: []string{"a\n1\n2\n"}, single: true, want: true},
		{name: "float forms", pred: "a\n1.\n.5\n-.5\n1e2\n+1.5\n", golds: []string{"a\n1\n0.5\n-0.5\n100\n1.5\n"}, single: true, want: true},
		{name: "inf parses as float", pred: "a\ninf\n-Infinity\n", golds: []string{"a\ninf\n-inf\n"}, single: true, want: true},
		{name: "overflowing float makes text", pred: "a\n1e400\n1\n", golds: []string{"a\ninf\n1\n"}, single: true, want: false},
		{name: "1,000 is text", pred: "a\n\"1,000\"\n", golds: []string{"a\n1000\n"}, single: true, want: false},
		{name: "bools any case", pred: "a\nTRUE\nfalse\n", golds: []string{"a\nTrue\nFalse\n"}, single: true, want: true},
		{name: "bool equals 1 and 0", pred: "a\ntrue\nfalse\n", golds: []string{"a\n1\n0\n"}, single: true, want: true},
		{name: "yes/no are text", pred: "a\nyes\n", golds: []string{"a\n1\n"}, single: true, want: false},
		{name: "uint64 column", pred: "a\n18446744073709551615\n", golds: []string{"a\n18446744073709551615\n"}, single: true, want: true},
		{name: "beyond uint64 is text", pred: "a\n18446744073709551616\n", golds: []string{"a\n18446744073709551616.0\n"}, single: true, want: false},
		{name: "all-NA column is NaN then 0", pred: "a\n\n\"\"\n", golds: []string{"a\n0\n0\n"}, single: true, want: false}, // blank line skipped: 1 row vs 2
		{name: "all-NA quoted cells", pred: "a,b\n,1\n,2\n", golds: []string{"a,b\n0,1\n0,2\n"}, single: true, want: true},

		// Matching columns (§3.5).
		{name: "extra prediction columns ignored", pred: "x,a,y\n9,1,z\n", golds: []string{"a\n1\n"}, single: true, want: true},
		{name: "column names irrelevant", pred: "foo\n1\n", golds: []string{"bar\n1\n"}, single: true, want: true},
		{name: "one prediction column serves two gold columns", pred: "a\n1\n", golds: []string{"a,b\n1,1\n"}, single: true, want: true},
		{name: "missing gold column fails", pred: "a\n1\n", golds: []string{"a,b\n1,2\n"}, single: true, want: false},
		{name: "tolerance 0.01 passes", pred: "a\n0.01\n", golds: []string{"a\n0.0\n"}, single: true, want: true},
		{name: "1.01 vs 1.0 fails in IEEE", pred: "a\n1.01\n", golds: []string{"a\n1.0\n"}, single: true, want: false},
		{name: "relative tolerance on large values", pred: "a\n1000000000900\n", golds: []string{"a\n1000000000000\n"}, single: true, want: true},
		{name: "inf equals inf only", pred: "a\ninf\n", golds: []string{"a\n1e308\n"}, single: true, want: false},
		{name: "string 1 vs int 1 fails", pred: "a\n1\nx\n", golds: []string{"a\n1\nx\n"}, single: true, want: true},
		{name: "text '1' never equals number 1", pred: "a\n1\n2\n", golds: []string{"a\n1\nx\n"}, single: true, want: false},
		{name: "strings compare exactly (case)", pred: "a\nAbc\n", golds: []string{"a\nabc\n"}, single: true, want: false},
		{name: "strings compare exactly (1 vs 1.0)", pred: "a\n1\nx\n", golds: []string{"a\n1.0\nx\n"}, single: true, want: false},
		{name: "row order matters without ignore_order", pred: "a\n2\n1\n", golds: []string{"a\n1\n2\n"}, single: true, want: false},
		{name: "row order ignored", pred: "a\n2\n1\n", golds: []string{"a\n1\n2\n"}, single: true, ignoreOrder: true, want: true},
		{name: "columns sorted independently", pred: "a,b\n1,y\n2,x\n", golds: []string{"a,b\n1,x\n2,y\n"}, single: true, ignoreOrder: true, want: true},
		{name: "lexicographic sort mispairs near values", pred: "a\n10.0\n10.5\n", golds: []string{"a\n9.999\n10.5\n"}, single: true, ignoreOrder: true, want: false},
		{name: "same values without sort pair fine", pred: "a\n10.0\n10.5\n", golds: []string{"a\n9.999\n10.5\n"}, single: true, want: true},
		{name: "ints vs near floats mispaired by sort", pred: "a\n8.996\n9.996\n", golds: []string{"a\n9\n10\n"}, single: true, ignoreOrder: true, want: false},
		{name: "row counts must be equal", pred: "a\n1\n1\n", golds: []string{"a\n1\n"}, single: true, ignoreOrder: true, want: false},
		{name: "NaN becomes 0", pred: "a\n0\n", golds: []string{"a,b\n,1\n"}, single: true, cond: "[0]", want: true},
		{name: "NaN 0 is not the string 0", pred: "a\n0\nx\n", golds: []string{"a\n\nx\n"}, single: true, want: false},
		{name: "NaN in text column sorts as 0", pred: "a\n0\nb\n", golds: []string{"a\nb\n1\n"}, single: true, ignoreOrder: true, want: false},
		{name: "header-only gold matches header-only prediction of any width", pred: "x,y,z\n", golds: []string{"a\n"}, single: true, want: true},
		{name: "header-only gold vs rows", pred: "a\n1\n", golds: []string{"a\n"}, single: true, want: false},

		// Condition columns (§3.4, §3.5).
		{name: "condition selects gold columns", pred: "a\n1\n", golds: []string{"a,b\n1,2\n"}, single: true, cond: "[0]", want: true},
		{name: "negative condition index", pred: "b\n2\n", golds: []string{"a,b\n1,2\n"}, single: true, cond: "[-1]", want: true},
		{name: "duplicate condition index", pred: "a\n1\n", golds: []string{"a,b\n1,2\n"}, single: true, cond: "[0,0]", want: true},
		{name: "out of range condition errors", pred: "a\n1\n", golds: []string{"a\n1\n"}, single: true, cond: "[3]", wantErr: true},
		{name: "single file bare int 0 means all columns (lite)", pred: "a\n1\n", golds: []string{"a,b\n1,2\n"}, single: true, cond: "0", want: false},
		{name: "single file bare int k", pred: "b\n2\n", golds: []string{"a,b\n1,2\n"}, single: true, cond: "1", want: true},
		{name: "null condition means all", pred: "a,b\n1,2\n", golds: []string{"a,b\n1,2\n"}, single: true, cond: "null", want: true},

		// Gold variants.
		{name: "second variant matches", pred: "a\n2\n", golds: []string{"a\n1\n", "a\n2\n"}, want: true},
		{name: "no variant matches", pred: "a\n3\n", golds: []string{"a\n1\n", "a\n2\n"}, want: false},
		{name: "list of lists per variant", pred: "b\n5\n", golds: []string{"a,b\n1,9\n", "a,b\n1,5\n"}, cond: "[[0],[1]]", want: true},
		{name: "list of lists first variant uses its list", pred: "b\n9\n", golds: []string{"a,b\n1,9\n", "a,b\n1,5\n"}, cond: "[[0],[1]]", want: false},
		{name: "fewer lists than variants: earlier match wins", pred: "a\n1\n", golds: []string{"a\n1\n", "a\n2\n"}, cond: "[[0]]", want: true},
		{name: "fewer lists than variants: IndexError scores 0", pred: "a\n2\n", golds: []string{"a\n1\n", "a\n2\n"}, cond: "[[0]]", wantErr: true},
		{name: "extra lists ignored", pred: "a\n2\n", golds: []string{"a\n1\n", "a\n2\n"}, cond: "[[0],[0],[0]]", want: true},
		{name: "G=1 flat list starting with 0 checks all columns", pred: "a\n1\n", golds: []string{"a,b\n1,2\n"}, cond: "[0,1]", want: false},
		{name: "G=1 flat list starting with k checks only k", pred: "c\n3\n", golds: []string{"a,b,c\n1,2,3\n"}, cond: "[2,0]", want: true},
		{name: "G>1 flat list applies to every variant", pred: "a\n7\n", golds: []string{"a,b\n1,2\n", "a,b\n7,8\n"}, cond: "[0]", want: true},
		{name: "[[]] means all columns", pred: "a\n1\n", golds: []string{"a,b\n1,2\n", "a,b\n1,3\n"}, cond: "[[]]", want: false},
		{name: "[None] means all columns", pred: "a,b\n1,3\n", golds: []string{"a,b\n1,2\n", "a,b\n1,3\n"}, cond: "[null]", want: true},
		{name: "empty list means all columns", pred: "a,b\n1,3\n", golds: []string{"a,b\n1,2\n", "a,b\n1,3\n"}, cond: "[]", want: true},
		{name: "bq389: narrow variant b raises before c", pred: "a,b,c,d\n1,2,3,4\n", golds: []string{"a,b\n9,9\n", "a\n1\n", "a,b,c,d\n1,2,3,4\n"}, cond: "[1,2,3]", wantErr: true},
		{name: "bq389: variant a still matches", pred: "b,c,d\n2,3,4\n", golds: []string{"a,b,c,d\n1,2,3,4\n", "a\n1\n"}, cond: "[1,2,3]", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := scoreStrings(tt.pred, tt.golds, tt.single, tt.cond, tt.ignoreOrder)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("want an error (score 0), got verdict %v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tt.want {
				t.Errorf("verdict %v, want %v", got, tt.want)
			}
		})
	}
	if len(tests) < 60 {
		t.Errorf("only %d cases", len(tests))
	}
}

func scoreStrings(pred string, golds []string, single bool, cond string, ignoreOrder bool) (bool, error) {
	p, err := ReadCSV([]byte(pred))
	if err != nil {
		return false, err
	}
	var gs []*Frame
	for _, g := range golds {
		f, err := ReadCSV([]byte(g))
		if err != nil {
			return false, err
		}
		gs = append(gs, f)
	}
	var c dataset.Conditions
	if cond != "" {
		if err := json.Unmarshal([]byte(cond), &c); err != nil {
			return false, err
		}
	}
	return CompareGold(p, gs, single, c, ignoreOrder)
}

func TestColumnKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		csv  string
		want []ColumnKind
	}{
		{"a,b,c,d,e,f\n1,1.5,true,x,,1\n2,2,false,y,,\n", []ColumnKind{Int64, Float64, Bool, Text, Float64, Float64}},
		{"a,b\ntrue,18446744073709551615\n,1\n", []ColumnKind{BoolObject, Uint64}},
		{"a,b\n18446744073709551615,-9223372036854775809\n,1\n", []ColumnKind{Text, Text}},
		{"a\n", []ColumnKind{Text}},
	}
	for _, tt := range tests {
		f, err := ReadCSV([]byte(tt.csv))
		if err != nil {
			t.Fatalf("%q: %v", tt.csv, err)
		}
		for i, c := range f.Columns {
			if c.Kind != tt.want[i] {
				t.Errorf("%q column %d: %v, want %v", tt.csv, i, c.Kind, tt.want[i])
			}
		}
	}
	// The uint64-with-NA corner keeps the NA cell's raw text.
	f, _ := ReadCSV([]byte("a\n18446744073709551615\nNA\n"))
	if c := f.Columns[0].Cells[1]; c.Kind != PyStr || c.S != "NA" {
		t.Errorf("uint64+NA corner: %+v, want the text NA", c)
	}
}

func TestVectorsUpcast(t *testing.T) {
	t.Parallel()
	tests := []struct {
		csv  string
		want string // str() of the first column's first element
	}{
		{"a,b\n10,20\n", "10"},    // all int64: ints
		{"a,b\n10,2.5\n", "10.0"}, // int64 with float64: floats
		{"a,b\n10,x\n", "10"},     // with text: own types
		{"a,b\n10,true\n", "10"},  // bool with numbers: own types
		{"a,b\ntrue,false\n", "True"},
		{"a,b\n10,18446744073709551615\n", "10.0"}, // int64 with uint64: floats
	}
	for _, tt := range tests {
		f, err := ReadCSV([]byte(tt.csv))
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Vectors()[0][0].String(); got != tt.want {
			t.Errorf("%q: first element %q, want %q", tt.csv, got, tt.want)
		}
	}
}

func TestSortKey(t *testing.T) {
	t.Parallel()
	v := []PyValue{Float(10.5), Float(9.999), Str("10.5"), Int(0), Str("a"), Boolean(true)}
	sortVector(v)
	var got []string
	for _, x := range v {
		got = append(got, x.String())
	}
	want := []string{"0", "10.5", "10.5", "9.999", "True", "a"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sorted %q, want %q", got, want)
		}
	}
	if v[1].Kind != PyStr || v[2].Kind != PyFloat {
		t.Errorf("on equal text strings must sort before numbers: %+v %+v", v[1], v[2])
	}
}

func TestAgree(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b string
		want bool
	}{
		{"same rows other order", "x,y\n1,a\n2,b\n", "p,q\n2,b\n1,a\n", true},
		{"within 0.001", "x\n1.0004\n", "x\n1.0\n", true},
		{"beyond 0.001", "x\n1.002\n", "x\n1.0\n", false},
		{"column order irrelevant", "x,y\n1,a\n", "y,x\na,1\n", true},
		{"different shape", "x,y\n1,a\n", "x\n1\n", false},
		{"different row count", "x\n1\n1\n", "x\n1\n", false},
		{"NaN equals NaN", "x,y\n,1\n5,2\n", "x,y\n5,2\n,1\n", true},
		{"all-zero column invalid", "x,y\n0,1\n0,2\n", "x,y\n0,1\n0,2\n", false},
		{"0.0 column is valid", "x,y\n0.0,1\n", "x,y\n0.0,1\n", true},
		{"empty column invalid", "x,y\n,1\n,2\n", "x,y\n,1\n,2\n", false},
		{"newline in a cell invalid", "x\n\"a\nb\"\n", "x\n\"a\nb\"\n", false},
		{"no rows invalid", "x\n", "x\n", false},
		{"symmetric coverage", "x,y\n1,1\n", "x,y\n1,2\n", false},
		{"strings exact", "x\nA\n", "x\na\n", false},
	}
	for _, tt := range tests {
		a, err := ReadCSV([]byte(tt.a))
		if err != nil {
			t.Fatal(err)
		}
		b, err := ReadCSV([]byte(tt.b))
		if err != nil {
			t.Fatal(err)
		}
		if got := Agree(a, b); got != tt.want {
			t.Errorf("%s: Agree = %v, want %v", tt.name, got, tt.want)
		}
		if Agree(a, b) != Agree(b, a) {
			t.Errorf("%s: Agree is not symmetric", tt.name)
		}
	}
}
