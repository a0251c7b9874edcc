package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// Vectors turns the frame into one element list per column, applying the
// dtype rules of DataFrame.transpose().values.tolist(): all-int64 (or all
// uint64) frames give ints, all-bool frames bools, other all-numeric frames
// give floats everywhere, and any other mix keeps each column's own types.
func (f *Frame) Vectors() [][]PyValue {
	allInt64, allUint64, allBool, allNumeric := true, true, true, true
	for _, c := range f.Columns {
		allInt64 = allInt64 && c.Kind == Int64
		allUint64 = allUint64 && c.Kind == Uint64
		allBool = allBool && c.Kind == Bool
		allNumeric = allNumeric && (c.Kind == Int64 || c.Kind == Uint64 || c.Kind == Float64)
	}
	toFloat := allNumeric && !allInt64 && !allUint64
	_ = allBool // all-bool frames keep bools, as the own-type branch does
	out := make([][]PyValue, len(f.Columns))
	for i, c := range f.Columns {
		v := make([]PyValue, len(c.Cells))
		copy(v, c.Cells)
		if toFloat {
			for j := range v {
				v[j] = v[j].asFloat()
			}
		}
		out[i] = v
	}
	return out
}

// Select returns the frame restricted to the columns at the given positions
// (negative counts from the end, duplicates allowed), like DataFrame.iloc.
func (f *Frame) Select(cols []int) (*Frame, error) {
	out := &Frame{Rows: f.Rows}
	for _, c := range cols {
		i := c
		if i < 0 {
			i += len(f.Columns)
		}
		if i < 0 || i >= len(f.Columns) {
			return nil, fmt.Errorf("condition column %d is out of range for a gold table of %d columns", c, len(f.Columns))
		}
		out.Columns = append(out.Columns, f.Columns[i])
	}
	return out, nil
}

// matchOptions select between the official evaluator's column match and
// ReFoRCE's vote.
type matchOptions struct {
	absTol float64
	// nanToZero: the evaluator turns every missing value into the int 0
	// before comparing; the vote instead treats NaN as equal to NaN.
	nanToZero   bool
	ignoreOrder bool
}

// sortVector sorts v in place by (str(x), is_number), Python's stable sort
// with the evaluator's key: lexicographic, strings before numbers on ties.
func sortVector(v []PyValue) {
	keys := make([]string, len(v))
	for i := range v {
		keys[i] = v[i].String()
	}
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ka, kb := keys[idx[a]], keys[idx[b]]
		if ka != kb {
			return ka < kb
		}
		return !v[idx[a]].IsNumber() && v[idx[b]].IsNumber()
	})
	sorted := make([]PyValue, len(v))
	for i, j := range idx {
		sorted[i] = v[j]
	}
	copy(v, sorted)
}

// prepare copies a vector, normalises NaN if asked and sorts it if order is
// ignored.
func prepare(v []PyValue, o matchOptions) []PyValue {
	out := make([]PyValue, len(v))
	copy(out, v)
	if o.nanToZero {
		for i := range out {
			if out[i].IsNaN() {
				out[i] = Int(0)
			}
		}
	}
	if o.ignoreOrder {
		sortVector(out)
	}
	return out
}

// vectorsMatch compares two prepared vectors element by element.
func vectorsMatch(a, b []PyValue, o matchOptions) bool {
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

// everyColumnMatched reports whether each column in want is matched by some
// column in have.
func everyColumnMatched(want, have [][]PyValue, o matchOptions) bool {
	prepHave := make([][]PyValue, len(have))
	for i, h := range have {
		prepHave[i] = prepare(h, o)
	}
	for _, w := range want {
		pw := prepare(w, o)
		found := false
		for _, h := range prepHave {
			if vectorsMatch(pw, h, o) {
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

// evalTolerance is the official evaluator's absolute tolerance.
const evalTolerance = 1e-2

// CompareTable is Spider 2.0's compare_pandas_table (lite): every selected
// gold column must be matched by some predicted column. cond is the
// already-resolved condition for this gold table: nil or empty for all
// columns.
func CompareTable(pred, gold *Frame, cond []int, ignoreOrder bool) (bool, error) {
	g := gold
	if len(cond) > 0 {
		var err error
		if g, err = gold.Select(cond); err != nil {
			return false, err
		}
	}
	o := matchOptions{absTol: evalTolerance, nanToZero: true, ignoreOrder: ignoreOrder}
	return everyColumnMatched(g.Vectors(), pred.Vectors(), o), nil
}

// Conditions is the raw condition_cols value of an eval config line: null,
// an int, a flat list of ints, or a list of lists (one per gold variant).
type Conditions struct {
	raw json.RawMessage
}

// UnmarshalJSON keeps the raw value; its meaning depends on the number of
// gold variants.
func (c *Conditions) UnmarshalJSON(b []byte) error {
	c.raw = append(json.RawMessage(nil), b...)
	return nil
}

// MarshalJSON writes the raw value back.
func (c Conditions) MarshalJSON() ([]byte, error) {
	if len(c.raw) == 0 {
		return []byte("null"), nil
	}
	return c.raw, nil
}

// ConditionsOf builds Conditions from a Go value (for generated eval files).
func ConditionsOf(v any) Conditions {
	b, _ := json.Marshal(v)
	return Conditions{raw: b}
}

// perVariant resolves condition_cols for each of g gold variants with the
// official multi-variant rules (spider2-formats.md §3.4). An entry of nil
// means "all columns"; errs[i] is set where variant i would raise.
func (c Conditions) perVariant(g int) (conds [][]int, errs []error) {
	conds = make([][]int, g)
	errs = make([]error, g)
	var v any
	if len(c.raw) > 0 {
		if err := json.Unmarshal(c.raw, &v); err != nil {
			for i := range errs {
				errs[i] = fmt.Errorf("condition_cols %s: %w", c.raw, err)
			}
			return conds, errs
		}
	}
	list, isList := v.([]any)
	if v == nil || (isList && (len(list) == 0 || (len(list) == 1 && (list[0] == nil || isEmptyList(list[0]))))) {
		return conds, errs // no condition for any variant
	}
	if !isList {
		// A bare value: the single-file path passes it as is.
		for i := range conds {
			conds[i], errs[i] = truthyColumns(v)
		}
		return conds, errs
	}
	allLists := true
	for _, e := range list {
		if _, ok := e.([]any); !ok {
			allLists = false
		}
	}
	if g > 1 && !allLists {
		for i := range conds {
			conds[i], errs[i] = truthyColumns(v)
		}
		return conds, errs
	}
	for i := range conds {
		if i >= len(list) {
			errs[i] = fmt.Errorf("condition_cols has %d entries but gold variant %d exists (IndexError in the official evaluator)", len(list), i+1)
			continue
		}
		conds[i], errs[i] = truthyColumns(list[i])
	}
	return conds, errs
}

// single resolves condition_cols for a single gold file: the raw value is
// used as given.
func (c Conditions) single() ([]int, error) {
	var v any
	if len(c.raw) > 0 {
		if err := json.Unmarshal(c.raw, &v); err != nil {
			return nil, fmt.Errorf("condition_cols %s: %w", c.raw, err)
		}
	}
	return truthyColumns(v)
}

func isEmptyList(v any) bool {
	l, ok := v.([]any)
	return ok && len(l) == 0
}

// truthyColumns applies lite's "if condition_cols:" test: falsy values (None,
// 0, []) mean all columns; a bare int k means [k].
func truthyColumns(v any) ([]int, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case float64:
		if x == 0 {
			return nil, nil
		}
		return []int{int(x)}, nil
	case []any:
		out := make([]int, 0, len(x))
		for _, e := range x {
			n, ok := e.(float64)
			if !ok || n != float64(int(n)) {
				return nil, fmt.Errorf("condition column %v is not an integer position", e)
			}
			out = append(out, int(n))
		}
		return out, nil
	case bool:
		if !x {
			return nil, nil
		}
		return []int{1}, nil
	}
	return nil, errors.New("condition_cols is not a column position or a list of them")
}

// CompareGold scores pred against one example's gold tables: a single gold
// file uses the raw condition; several variants are tried in order and the
// first match wins, an error on a variant ending the search with 0.
func CompareGold(pred *Frame, golds []*Frame, single bool, cond Conditions, ignoreOrder bool) (bool, error) {
	if single {
		if len(golds) != 1 {
			return false, fmt.Errorf("single gold mode needs one gold table, got %d", len(golds))
		}
		cols, err := cond.single()
		if err != nil {
			return false, err
		}
		return CompareTable(pred, golds[0], cols, ignoreOrder)
	}
	conds, errs := cond.perVariant(len(golds))
	for i, g := range golds {
		if errs[i] != nil {
			return false, errs[i]
		}
		ok, err := CompareTable(pred, g, conds[i], ignoreOrder)
		if err != nil {
			return false, fmt.Errorf("gold variant %d: %w", i+1, err)
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}
