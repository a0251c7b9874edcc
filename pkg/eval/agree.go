package eval

import "strings"

// voteTolerance is ReFoRCE's absolute tolerance when comparing candidates.
const voteTolerance = 1e-3

// Valid is ReFoRCE's is_valid_result: no cell holds a line break, and no
// column is made only of "0" and empty cells (after fillna("") and str()).
// "0.0" is not empty, as in the reference. A table with no rows is invalid.
func Valid(f *Frame) bool {
	if len(f.Columns) == 0 {
		return false
	}
	for _, c := range f.Columns {
		allEmpty := true
		for _, v := range c.Cells {
			if v.Kind == PyStr && strings.ContainsAny(v.S, "\n") {
				return false
			}
			if v.IsNaN() {
				continue
			}
			if s := v.String(); s != "0" && s != "" {
				allEmpty = false
			}
		}
		if allEmpty {
			return false
		}
	}
	return true
}

// Agree is the answer equality ReFoRCE's vote uses: both answers valid, the
// same shape, and every column of each matched by some column of the other
// regardless of names and row order, numbers within 0.001 and NaN equal to
// NaN. The reference checked validity and column coverage on one side only,
// which made agreement depend on argument order; here it is symmetric.
func Agree(a, b *Frame) bool {
	if a.Rows != b.Rows || len(a.Columns) != len(b.Columns) {
		return false
	}
	if !Valid(a) || !Valid(b) {
		return false
	}
	va, vb := a.votePrepared(), b.votePrepared()
	return coveredBy(va, vb) && coveredBy(vb, va)
}

var voteOptions = matchOptions{absTol: voteTolerance, ignoreOrder: true}

// votePrepared returns the frame's column vectors sorted for the vote,
// computed once.
func (f *Frame) votePrepared() []vector {
	f.voteOnce.Do(func() { f.voteVectors = prepareFrame(f, voteOptions) })
	return f.voteVectors
}

// coveredBy reports whether every prepared column of want matches some
// prepared column of have. The vote has no comparison budget: its tables
// are query results, already bounded by the warehouse.
func coveredBy(want, have []vector) bool {
	ok, _ := everyColumnMatched(want, have, voteOptions, newBudget(-1))
	return ok
}
