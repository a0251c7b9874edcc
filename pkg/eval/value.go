package eval

import (
	"math"
	"strconv"

	"github.com/quorumsql/quorum/pkg/pyrepr"
)

// PyKind is the Python type of one element after pandas' conversion.
type PyKind uint8

// Element kinds.
const (
	PyNaN PyKind = iota + 1
	PyInt
	PyFloat
	PyBool
	PyStr
)

// PyValue is one cell as the Python evaluator sees it. The small fields
// come last so that a cell takes 48 bytes rather than 64: tables of
// millions of cells are held several times while compared.
type PyValue struct {
	// I holds ints; U holds ints beyond int64 (Unsigned set).
	I        int64
	U        uint64
	F        float64
	S        string
	Kind     PyKind
	Unsigned bool
	B        bool
}

// Constructors.
func NaN() PyValue            { return PyValue{Kind: PyNaN} }
func Int(i int64) PyValue     { return PyValue{Kind: PyInt, I: i} }
func Uint(u uint64) PyValue   { return PyValue{Kind: PyInt, U: u, Unsigned: true} }
func Float(f float64) PyValue { return PyValue{Kind: PyFloat, F: f} }
func Boolean(b bool) PyValue  { return PyValue{Kind: PyBool, B: b} }
func Str(s string) PyValue    { return PyValue{Kind: PyStr, S: s} }
func (v PyValue) IsNaN() bool { return v.Kind == PyNaN }
func (v PyValue) IsNumber() bool {
	// bool is a subclass of int in Python; NaN is a float.
	return v.Kind == PyInt || v.Kind == PyFloat || v.Kind == PyBool || v.Kind == PyNaN
}

// Float64 is Python's float(v) for numbers.
func (v PyValue) Float64() float64 {
	switch v.Kind {
	case PyInt:
		if v.Unsigned {
			return float64(v.U)
		}
		return float64(v.I)
	case PyFloat:
		return v.F
	case PyBool:
		if v.B {
			return 1
		}
		return 0
	}
	return math.NaN()
}

// String is Python's str(v).
func (v PyValue) String() string {
	switch v.Kind {
	case PyInt:
		if v.Unsigned {
			return strconv.FormatUint(v.U, 10)
		}
		return strconv.FormatInt(v.I, 10)
	case PyFloat:
		return pyrepr.Float(v.F)
	case PyBool:
		return pyrepr.Bool(v.B)
	case PyStr:
		return v.S
	}
	return "nan"
}

// asFloat converts an int element to float, as numpy does when a frame's
// columns are numeric but not of one integer kind.
func (v PyValue) asFloat() PyValue {
	if v.Kind == PyInt {
		return Float(v.Float64())
	}
	return v
}

// isClose is CPython's math.isclose, evaluated in the same order.
func isClose(a, b, relTol, absTol float64) bool {
	if a == b {
		return true
	}
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return false
	}
	diff := math.Abs(b - a)
	return diff <= math.Abs(relTol*b) || diff <= math.Abs(relTol*a) || diff <= absTol
}
