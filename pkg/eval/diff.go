package eval

import (
	"math"
	"strconv"
	"strings"
)

// RowDiff says for a reader how an answer's table differs from a gold
// table: which gold columns the answer holds, and which gold rows it lacks
// or adds over those columns. It explains a verdict; it does not make one
// (CompareGold and BirdEqualFrames do).
type RowDiff struct {
	GoldRows   int `json:"gold_rows"`
	AnswerRows int `json:"answer_rows"`
	// Columns are the gold's columns; Found names, for each, the answer
	// column sharing most of its values or, failing that, of the same
	// name; "" where the answer has none.
	Columns []string `json:"gold_columns"`
	Found   []string `json:"answer_columns"`
	// Missing are gold rows the answer lacks and Extra answer rows gold
	// lacks, over the columns found, at most the limit each (their cells
	// as written); MissingCount and ExtraCount are how many there are.
	Missing      [][]string `json:"missing,omitempty"`
	Extra        [][]string `json:"extra,omitempty"`
	MissingCount int        `json:"missing_count"`
	ExtraCount   int        `json:"extra_count"`
}

// DiffRows compares answer with gold for a reader, listing at most limit
// missing and extra rows. Numbers are equal within 0.01, as the
// evaluator's tolerance allows; a missing value is equal to another.
func DiffRows(answer, gold *Frame, limit int) *RowDiff {
	d := &RowDiff{GoldRows: gold.Rows, AnswerRows: answer.Rows}
	pick := matchColumns(answer, gold)
	var gcols, acols []*Column
	for j, i := range pick {
		d.Columns = append(d.Columns, gold.Columns[j].Name)
		name := ""
		if i >= 0 {
			name = answer.Columns[i].Name
			gcols, acols = append(gcols, &gold.Columns[j]), append(acols, &answer.Columns[i])
		}
		d.Found = append(d.Found, name)
	}
	if len(gcols) == 0 {
		return d // no column in common: the rows cannot be set side by side
	}
	left := map[string]int{}
	for r := range gold.Rows {
		left[rowKey(gcols, r)]++
	}
	for r := range answer.Rows {
		k := rowKey(acols, r)
		if left[k] > 0 {
			left[k]--
			continue
		}
		d.ExtraCount++
		if len(d.Extra) < limit {
			d.Extra = append(d.Extra, rowCells(acols, r))
		}
	}
	for r := range gold.Rows {
		k := rowKey(gcols, r)
		if left[k] == 0 {
			continue
		}
		left[k]--
		d.MissingCount++
		if len(d.Missing) < limit {
			d.Missing = append(d.Missing, rowCells(gcols, r))
		}
	}
	return d
}

// matchColumns gives each gold column the answer column sharing most of
// its values (an answer with rows missing or extra still shares most), a
// column of the same name winning a tie, else the one of its name; each
// answer column used once; -1 where there is none.
func matchColumns(answer, gold *Frame) []int {
	counts := func(c *Column) map[string]int {
		m := map[string]int{}
		for r := range c.Cells {
			m[cellKey(c.Cells[r])]++
		}
		return m
	}
	ac := make([]map[string]int, len(answer.Columns))
	for i := range answer.Columns {
		ac[i] = counts(&answer.Columns[i])
	}
	used := make([]bool, len(answer.Columns))
	pick := make([]int, len(gold.Columns))
	for j := range gold.Columns {
		g := &gold.Columns[j]
		gc := counts(g)
		best, bestShared := -1, 0
		for i := range answer.Columns {
			if used[i] {
				continue
			}
			shared := 0
			for k, n := range gc {
				shared += min(n, ac[i][k])
			}
			named := strings.EqualFold(answer.Columns[i].Name, g.Name)
			if shared > bestShared || shared > 0 && shared == bestShared && named || shared == 0 && bestShared == 0 && best < 0 && named {
				best, bestShared = i, shared
			}
		}
		pick[j] = best
		if best >= 0 {
			used[best] = true
		}
	}
	return pick
}

// rowKey is row r over cols (cellKey's).
func rowKey(cols []*Column, r int) string {
	var b strings.Builder
	for _, c := range cols {
		b.WriteString(cellKey(c.Cells[r]))
	}
	return b.String()
}

// cellKey is v with numbers rounded to the evaluator's tolerance (0.01).
func cellKey(v PyValue) string {
	switch {
	case v.IsNaN():
		return "N;"
	case v.IsNumber():
		return "n" + strconv.FormatFloat(math.Round(v.Float64()*100)/100, 'f', 2, 64) + ";"
	}
	return "s" + strconv.Itoa(len(v.S)) + ":" + v.S
}

func rowCells(cols []*Column, r int) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Cells[r].String()
	}
	return out
}
