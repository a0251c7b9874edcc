package eval

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/quorumsql/quorum/pkg/dataset"
	"hash/maphash"
	"math"
	"slices"
	"strings"
)

// Vectors turns the frame into one element list per column, applying the
// dtype rules of DataFrame.transpose().values.tolist(): all-int64 (or all
// uint64) frames give ints, all-bool frames bools, other all-numeric frames
// give floats everywhere, and any other mix keeps each column's own types.
func (f *Frame) Vectors() [][]PyValue {
	toFloat := f.upcastsToFloat()
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

// upcastsToFloat reports whether Vectors turns the frame's ints into floats:
// the columns are all numeric but not all of one integer kind. All-bool
// frames keep bools, as the own-type branch does.
func (f *Frame) upcastsToFloat() bool {
	allInt64, allUint64, allNumeric := true, true, true
	for _, c := range f.Columns {
		allInt64 = allInt64 && c.Kind == Int64
		allUint64 = allUint64 && c.Kind == Uint64
		allNumeric = allNumeric && (c.Kind == Int64 || c.Kind == Uint64 || c.Kind == Float64)
	}
	return allNumeric && !allInt64 && !allUint64
}

// Select returns the frame restricted to the columns at the given positions
// (negative counts from the end, duplicates allowed), like DataFrame.iloc.
func (f *Frame) Select(cols []int) (*Frame, error) {
	out := &Frame{Rows: f.Rows}
	for _, c := range cols {
		i, err := f.position(c)
		if err != nil {
			return nil, err
		}
		out.Columns = append(out.Columns, f.Columns[i])
	}
	return out, nil
}

// selectDistinct is Select keeping each column once: a condition naming a
// column twice asks nothing more of the prediction, and a gold eval line
// repeating one position a million times must not cost a million columns.
// The kinds present, which decide Vectors' upcast, are unchanged.
func (f *Frame) selectDistinct(cols []int) (*Frame, error) {
	seen := make([]bool, len(f.Columns))
	out := &Frame{Rows: f.Rows}
	for _, c := range cols {
		i, err := f.position(c)
		if err != nil {
			return nil, err
		}
		if !seen[i] {
			seen[i] = true
			out.Columns = append(out.Columns, f.Columns[i])
		}
	}
	return out, nil
}

// position resolves a condition column (negative counts from the end).
func (f *Frame) position(c int) (int, error) {
	i := c
	if i < 0 {
		i += len(f.Columns)
	}
	if i < 0 || i >= len(f.Columns) {
		return 0, fmt.Errorf("condition column %d is out of range for a gold table of %d columns", c, len(f.Columns))
	}
	return i, nil
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
	var s sorter
	s.sort(v)
}

// sorter sorts vectors, reusing its buffers from one to the next.
type sorter struct {
	keys []string
	idx  []int
	tmp  []PyValue
}

func (s *sorter) sort(v []PyValue) {
	s.keys = grow(s.keys, len(v))
	s.idx = grow(s.idx, len(v))
	for i := range v {
		s.keys[i] = v[i].String()
		s.idx[i] = i
	}
	keys := s.keys
	slices.SortStableFunc(s.idx, func(a, b int) int {
		if c := strings.Compare(keys[a], keys[b]); c != 0 {
			return c
		}
		switch na, nb := v[a].IsNumber(), v[b].IsNumber(); {
		case !na && nb:
			return -1
		case na && !nb:
			return 1
		}
		return 0
	})
	s.tmp = grow(s.tmp, len(v))
	for i, j := range s.idx {
		s.tmp[i] = v[j]
	}
	copy(v, s.tmp)
	clear(s.keys) // let the key strings go
}

// Element kinds of a prepared vector: all a comparison needs to know.
const (
	elemNumber uint8 = iota // compared by float value within tolerance
	elemNaN                 // a missing value (NaN equals NaN in the vote)
	elemStr                 // compared as exact text
)

// vector is one column prepared for matching: normalised, sorted if order
// is ignored, and reduced to what vectorsMatch reads (9 bytes a number
// against a PyValue's 48), so the comparison loop runs over plain arrays.
type vector struct {
	kinds []uint8
	nums  []float64 // float(x) of numbers
	strs  []string  // text of strings; nil when the vector holds none
}

func (v *vector) len() int { return len(v.kinds) }

// scratch holds buffers reused while preparing a frame's columns.
type scratch struct {
	cells []PyValue
	sorter
}

// prepare builds the vector of one column: upcast to float if the frame
// upcasts, NaN to 0 if asked, sorted if order is ignored. scratch is
// reused between columns.
func prepare(cells []PyValue, toFloat bool, o matchOptions, sc *scratch) vector {
	sc.cells = grow(sc.cells, len(cells))
	v := sc.cells
	copy(v, cells)
	for i := range v {
		if toFloat {
			v[i] = v[i].asFloat()
		}
		if o.nanToZero && v[i].IsNaN() {
			v[i] = Int(0)
		}
	}
	if o.ignoreOrder {
		sc.sort(v)
	}
	out := vector{kinds: make([]uint8, len(v)), nums: make([]float64, len(v))}
	for i, x := range v {
		switch {
		case x.Kind == PyStr:
			if out.strs == nil {
				out.strs = make([]string, len(v))
			}
			out.kinds[i], out.strs[i] = elemStr, x.S
		case x.IsNaN():
			out.kinds[i], out.nums[i] = elemNaN, math.NaN()
		default:
			out.kinds[i], out.nums[i] = elemNumber, x.Float64()
		}
	}
	return out
}

// prepareFrame prepares every column of f.
func prepareFrame(f *Frame, o matchOptions) []vector {
	toFloat := f.upcastsToFloat()
	var sc scratch
	out := make([]vector, len(f.Columns))
	for i, c := range f.Columns {
		out[i] = prepare(c.Cells, toFloat, o, &sc)
	}
	return out
}

// vectorsMatch compares two prepared vectors element by element, as the
// evaluator does: numbers within tolerance (NaN equal to NaN in the vote),
// strings exactly, a number never equal to a string. It also returns how
// many elements it examined, which the comparison budget counts.
func vectorsMatch(a, b *vector, o matchOptions) (bool, int) {
	if a.len() != b.len() {
		return false, 1
	}
	for i, ka := range a.kinds {
		kb := b.kinds[i]
		switch {
		case ka == elemStr || kb == elemStr:
			if ka != kb || a.strs[i] != b.strs[i] {
				return false, i + 1
			}
		case !o.nanToZero && ka == elemNaN && kb == elemNaN:
		case !isClose(a.nums[i], b.nums[i], 1e-9, o.absTol):
			return false, i + 1
		}
	}
	return true, max(a.len(), 1)
}

// budget counts the value comparisons of one scoring against its limit.
type budget struct {
	left, limit int64 // limit < 0: no limit
}

func newBudget(limit int64) *budget { return &budget{left: limit, limit: limit} }

// spend takes n comparisons and reports whether the budget is exhausted.
func (b *budget) spend(n int) bool {
	if b.limit < 0 {
		return false
	}
	b.left -= int64(n)
	return b.left < 0
}

// everyColumnMatched reports whether each column in want is matched by some
// column in have. A column of have with the very same elements is found by
// hash, so a correct prediction costs one pass however wide it is; other
// columns are compared one by one as the evaluator does, and that fails
// with ErrTooLarge when the comparisons exceed the budget: columns ×
// columns × rows reaches 10^9 for a 1.5 MB prediction of many columns alike
// but for their last values.
func everyColumnMatched(want, have []vector, o matchOptions, b *budget) (bool, error) {
	exact := newExactIndex(have, o)
	for w := range want {
		found := exact.has(&want[w])
		for h := 0; h < len(have) && !found; h++ {
			ok, n := vectorsMatch(&want[w], &have[h], o)
			if b.spend(n) {
				return false, fmt.Errorf("%w: matching %d gold columns against %d predicted columns of %d rows takes more than %d value comparisons (limit %d)",
					ErrTooLarge, len(want), len(have), want[w].len(), b.limit, b.limit)
			}
			found = ok
		}
		if !found {
			return false, nil
		}
	}
	return true, nil
}

// exactIndex finds vectors by their exact elements. Identical vectors
// always match (a number is close to itself, NaN equals NaN where the
// options say so), so a hit answers without comparing.
type exactIndex struct {
	o     matchOptions
	seed  maphash.Seed
	first map[uint64]int // hash -> first vector of have with it
	have  []vector
}

func newExactIndex(have []vector, o matchOptions) *exactIndex {
	x := &exactIndex{o: o, seed: maphash.MakeSeed(), first: make(map[uint64]int, len(have)), have: have}
	for i := range have {
		if h, ok := x.hash(&have[i]); ok {
			if _, dup := x.first[h]; !dup {
				x.first[h] = i
			}
		}
	}
	return x
}

// hash hashes v's elements; ok is false when v might not match itself (a
// float NaN, or a missing value where NaN is not equal to NaN).
func (x *exactIndex) hash(v *vector) (uint64, bool) {
	var h maphash.Hash
	h.SetSeed(x.seed)
	var buf [8]byte
	for i, k := range v.kinds {
		h.WriteByte(k)
		switch {
		case k == elemStr:
			binary.LittleEndian.PutUint64(buf[:], uint64(len(v.strs[i])))
			h.Write(buf[:])
			h.WriteString(v.strs[i])
		case k == elemNaN && !x.o.nanToZero:
		case k == elemNaN || math.IsNaN(v.nums[i]):
			return 0, false
		default:
			binary.LittleEndian.PutUint64(buf[:], math.Float64bits(v.nums[i]))
			h.Write(buf[:])
		}
	}
	return h.Sum64(), true
}

// has reports whether have holds a vector identical to w.
func (x *exactIndex) has(w *vector) bool {
	h, ok := x.hash(w)
	if !ok {
		return false
	}
	i, ok := x.first[h]
	return ok && identical(w, &x.have[i])
}

// identical reports whether a and b have the same elements, bit for bit.
func identical(a, b *vector) bool {
	if a.len() != b.len() {
		return false
	}
	for i, k := range a.kinds {
		switch {
		case k != b.kinds[i]:
			return false
		case k == elemStr:
			if a.strs[i] != b.strs[i] {
				return false
			}
		case math.Float64bits(a.nums[i]) != math.Float64bits(b.nums[i]):
			return false
		}
	}
	return true
}

// evalTolerance is the official evaluator's absolute tolerance.
const evalTolerance = 1e-2

// evalOptions are the official evaluator's match options.
func evalOptions(ignoreOrder bool) matchOptions {
	return matchOptions{absTol: evalTolerance, nanToZero: true, ignoreOrder: ignoreOrder}
}

// CompareTable is Spider 2.0's compare_pandas_table (lite): every selected
// gold column must be matched by some predicted column. cond is the
// already-resolved condition for this gold table: nil or empty for all
// columns. It works within the default Limits.
func CompareTable(pred, gold *Frame, cond []int, ignoreOrder bool) (bool, error) {
	o := evalOptions(ignoreOrder)
	return compareTable(prepareFrame(pred, o), gold, cond, o, newBudget(Limits{}.withDefaults().MaxCompare))
}

// compareTable is CompareTable on an already prepared prediction.
func compareTable(pred []vector, gold *Frame, cond []int, o matchOptions, b *budget) (bool, error) {
	g := gold
	if len(cond) > 0 {
		var err error
		if g, err = gold.selectDistinct(cond); err != nil {
			return false, err
		}
	}
	return everyColumnMatched(prepareFrame(g, o), pred, o, b)
}

// variantConds resolves condition_cols for each of g gold variants with the
// official multi-variant rules (spider2-formats.md §3.4). An entry of nil
// means "all columns"; errs[i] is set where variant i would raise.
func variantConds(c dataset.Conditions, g int) (conds [][]int, errs []error) {
	raw := c.Raw()
	conds = make([][]int, g)
	errs = make([]error, g)
	var v any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			for i := range errs {
				errs[i] = fmt.Errorf("condition_cols %s: %w", raw, err)
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

// singleConds resolves condition_cols for a single gold file: the raw value is
// used as given.
func singleConds(c dataset.Conditions) ([]int, error) {
	raw := c.Raw()
	var v any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("condition_cols %s: %w", raw, err)
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
// first match wins, an error on a variant ending the search with 0. It
// works within the default Limits.
func CompareGold(pred *Frame, golds []*Frame, single bool, cond dataset.Conditions, ignoreOrder bool) (bool, error) {
	return CompareGoldLimited(pred, golds, single, cond, ignoreOrder, Limits{})
}

// CompareGoldLimited is CompareGold within lim.MaxCompare value comparisons
// over all variants. The prediction is prepared (sorted) once for them all.
func CompareGoldLimited(pred *Frame, golds []*Frame, single bool, cond dataset.Conditions, ignoreOrder bool, lim Limits) (bool, error) {
	lim = lim.withDefaults()
	o := evalOptions(ignoreOrder)
	b := newBudget(lim.MaxCompare)
	if single {
		if len(golds) != 1 {
			return false, fmt.Errorf("single gold mode needs one gold table, got %d", len(golds))
		}
		cols, err := singleConds(cond)
		if err != nil {
			return false, err
		}
		return compareTable(prepareFrame(pred, o), golds[0], cols, o, b)
	}
	conds, errs := variantConds(cond, len(golds))
	var prepared []vector
	for i, g := range golds {
		if errs[i] != nil {
			return false, errs[i]
		}
		if prepared == nil {
			prepared = prepareFrame(pred, o)
		}
		ok, err := compareTable(prepared, g, conds[i], o, b)
		if err != nil {
			return false, fmt.Errorf("gold variant %d: %w", i+1, err)
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}
