package sqlite

import (
	"bytes"
	"database/sql/driver"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

	msqlite "modernc.org/sqlite"
)

// SQLite checks its interrupt between VM steps, never inside a function
// call, and a few built-ins are quadratic in one call: instr, replace and
// the two-argument trims compare every position of a string with a
// pattern (instr over a 2 MB string for a 1 MB needle that fails at its
// last byte ran 25 s; at the 16 MiB value cap it would be hours), and
// LIKE/GLOB compare every position with the rest of the pattern (2 MB
// against a 48 KB pattern: 424 s). No limit short of a few tens of KB per
// value bounds them, and that would refuse real data and results. So
// quorum's connections replace exactly those built-ins with Go versions of
// the same semantics (the tests compare them with the built-ins): instr,
// replace and trim run in linear time, and LIKE/GLOB, which have no
// linear algorithm, keep SQLite's algorithm and stop once the statement
// is interrupted.

// funcs are one database's replacements; the limits are the pool's.
type funcs struct {
	// maxValue bounds any string an override builds (SQLITE_LIMIT_LENGTH).
	maxValue int
	// maxPattern bounds a LIKE or GLOB pattern in bytes
	// (SQLITE_LIMIT_LIKE_PATTERN_LENGTH).
	maxPattern int
}

// errTooBig is SQLite's own text for a value over SQLITE_LIMIT_LENGTH.
var errTooBig = errors.New("string or blob too big")

// register replaces the quadratic built-ins on every connection drv opens.
// like is registered variadic because the driver keys functions by name
// alone; SQLite then uses it for both LIKE forms (2 and 3 arguments).
func (f *funcs) register(drv *msqlite.Driver) error {
	for _, fn := range []struct {
		name string
		args int32
		impl func(*msqlite.FunctionContext, []driver.Value) (driver.Value, error)
	}{
		{"instr", 2, instr},
		{"replace", 3, f.replace},
		{"trim", 2, trimmer(trimLeft | trimRight)},
		{"ltrim", 2, trimmer(trimLeft)},
		{"rtrim", 2, trimmer(trimRight)},
		{"like", -1, f.like},
		{"glob", 2, f.glob},
	} {
		impl := &msqlite.FunctionImpl{NArgs: fn.args, Deterministic: true, Scalar: fn.impl, VolatileArgs: true}
		if err := drv.RegisterFunction(fn.name, impl); err != nil {
			return fmt.Errorf("register sql function %s: %w", fn.name, err)
		}
	}
	return nil
}

// instr is SQLite's instr(X, Y): the 1-based character index of the first
// Y in X (bytes when both are blobs), 0 when none, NULL when either is.
func instr(fc *msqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	if args[0] == nil || args[1] == nil {
		return nil, nil
	}
	hb, hBlob := args[0].([]byte)
	nb, nBlob := args[1].([]byte)
	if hBlob && nBlob {
		if len(nb) == 0 {
			return int64(1), nil
		}
		return int64(bytes.Index(hb, nb) + 1), nil
	}
	h, _ := textOf(fc, args[0])
	n, _ := textOf(fc, args[1])
	return textInstr(h, n), nil
}

// textInstr follows SQLite's text scan: it tries offset 0, then each
// offset that is not a UTF-8 continuation byte, and counts those tries.
func textInstr(h, n string) int64 {
	if len(n) == 0 {
		return 1
	}
	if isContinuation(n[0]) {
		// Only offset 0 is tried at a continuation byte.
		if strings.HasPrefix(h, n) {
			return 1
		}
		return 0
	}
	i := strings.Index(h, n) // a match starts at a tried offset
	if i < 0 {
		return 0
	}
	pos := int64(1)
	for p := 1; p <= i; p++ {
		if !isContinuation(h[p]) {
			pos++
		}
	}
	return pos
}

func isContinuation(b byte) bool { return b&0xc0 == 0x80 }

// replace is SQLite's replace(X, Y, Z): every Y in X, left to right and
// not overlapping, becomes Z; always text. An empty Y (or one starting
// with a NUL byte) returns X unchanged before Z is looked at.
func (f *funcs) replace(fc *msqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	s, ok := textOf(fc, args[0])
	if !ok {
		return nil, nil
	}
	p, ok := textOf(fc, args[1])
	if !ok {
		return nil, nil
	}
	if p == "" || p[0] == 0 {
		return strings.Clone(s), nil
	}
	r, ok := textOf(fc, args[2])
	if !ok {
		return nil, nil
	}
	if len(r) > len(p) {
		// Sized before it is built: a hostile replace must fail, not
		// allocate gigabytes.
		if n := strings.Count(s, p); len(s)+n*(len(r)-len(p)) > f.maxValue {
			return nil, errTooBig
		}
	}
	return strings.ReplaceAll(s, p, r), nil
}

const (
	trimLeft = 1 << iota
	trimRight
)

// trimmer is SQLite's two-argument trim, ltrim or rtrim: the characters of
// Y (split as SQLite splits them, up to a NUL byte) are removed from X's
// ends; the first of them in Y's order that matches is the one removed.
func trimmer(side int) func(*msqlite.FunctionContext, []driver.Value) (driver.Value, error) {
	return func(fc *msqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		s, ok := textOf(fc, args[0])
		if !ok {
			return nil, nil
		}
		set, ok := textOf(fc, args[1])
		if !ok {
			return nil, nil
		}
		m, err := newCharMatcher(cString(set), newStopper(fc))
		if err != nil {
			return nil, err
		}
		if m.empty() {
			return strings.Clone(s), nil
		}
		lo, hi := 0, len(s)
		if side&trimLeft != 0 {
			if lo, err = m.trimLeft(s); err != nil {
				return nil, err
			}
		}
		if side&trimRight != 0 {
			if hi, err = m.trimRight(s[lo:]); err != nil {
				return nil, err
			}
			hi += lo
		}
		return strings.Clone(s[lo:hi]), nil
	}
}

// charMatcher finds, at one end of a string, the first character of the
// trim set (in the set's order) that the string starts (or ends) with.
// Characters of up to 4 bytes, all valid UTF-8 and nearly all others, are
// looked up by length, in constant time per position; a set with a longer
// (malformed) character falls back to SQLite's scan of the whole set,
// which is quadratic but stops when the statement is interrupted.
type charMatcher struct {
	single [256]int       // a 1-byte character's first index + 1, or 0
	multi  map[string]int // a 2- to 4-byte character's first index
	lens   [5]bool        // which of those lengths the set has
	chars  []string       // the set in order, only when long
	long   bool           // a character is longer than 4 bytes
	stop   *stopper
}

func newCharMatcher(set string, stop *stopper) (*charMatcher, error) {
	m := &charMatcher{multi: map[string]int{}, stop: stop}
	n := 0
	for c := range chars(set) {
		if err := stop.tick(1); err != nil {
			return nil, err
		}
		switch {
		case len(c) == 1:
			if m.single[c[0]] == 0 {
				m.single[c[0]] = n + 1
			}
		case len(c) <= 4:
			if _, ok := m.multi[c]; !ok {
				m.multi[c] = n
			}
			m.lens[len(c)] = true
		default:
			m.long = true
		}
		n++
	}
	if m.long {
		m.chars = slices.Collect(chars(set))
	}
	return m, nil
}

// chars yields s's characters as SQLITE_SKIP_UTF8 splits them: a byte,
// plus every continuation byte after it when it is 0xc0 or above.
func chars(s string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := 0; i < len(s); {
			j := i + 1
			if s[i] >= 0xc0 {
				for j < len(s) && isContinuation(s[j]) {
					j++
				}
			}
			if !yield(s[i:j]) {
				return
			}
			i = j
		}
	}
}

// bytesOnly reports whether every character of the set is one byte: the
// common case (trim(x, ' .,')), a table lookup per byte.
func (m *charMatcher) bytesOnly() bool { return !m.long && len(m.multi) == 0 }

func (m *charMatcher) empty() bool {
	return !m.long && len(m.multi) == 0 && m.single == [256]int{}
}

// at returns the l bytes of s that end at hi (right) or start at lo
// (left), or false when fewer remain.
func at(s string, edge, l int, right bool) (string, bool) {
	if right {
		if l > edge {
			return "", false
		}
		return s[edge-l : edge], true
	}
	if edge+l > len(s) {
		return "", false
	}
	return s[edge : edge+l], true
}

// match returns the length of the set character that s has at edge (its
// start when left, its end when right) and that comes first in set order,
// or 0.
func (m *charMatcher) match(s string, edge int, right bool) (int, error) {
	if m.long {
		for _, c := range m.chars {
			if err := m.stop.tick(len(c)); err != nil {
				return 0, err
			}
			if t, ok := at(s, edge, len(c), right); ok && t == c {
				return len(c), nil
			}
		}
		return 0, nil
	}
	best, bestLen := -1, 0
	if t, ok := at(s, edge, 1, right); ok && m.single[t[0]] > 0 {
		best, bestLen = m.single[t[0]]-1, 1
	}
	for l := 2; l <= 4; l++ {
		if !m.lens[l] {
			continue
		}
		t, ok := at(s, edge, l, right)
		if !ok {
			break
		}
		if i, ok := m.multi[t]; ok && (best < 0 || i < best) {
			best, bestLen = i, l
		}
	}
	return bestLen, m.stop.tick(1)
}

// trimLeft returns how many leading bytes of s the set removes.
func (m *charMatcher) trimLeft(s string) (int, error) {
	lo := 0
	if m.bytesOnly() {
		for lo < len(s) && m.single[s[lo]] > 0 {
			if lo++; lo%checkEvery == 0 {
				if err := m.stop.tick(checkEvery); err != nil {
					return lo, err
				}
			}
		}
		return lo, nil
	}
	for lo < len(s) {
		l, err := m.match(s, lo, false)
		if err != nil || l == 0 {
			return lo, err
		}
		lo += l
	}
	return lo, nil
}

// trimRight returns the length of s once the set removed its tail.
func (m *charMatcher) trimRight(s string) (int, error) {
	hi := len(s)
	if m.bytesOnly() {
		for hi > 0 && m.single[s[hi-1]] > 0 {
			if hi--; hi%checkEvery == 0 {
				if err := m.stop.tick(checkEvery); err != nil {
					return hi, err
				}
			}
		}
		return hi, nil
	}
	for hi > 0 {
		l, err := m.match(s, hi, true)
		if err != nil || l == 0 {
			return hi, err
		}
		hi -= l
	}
	return hi, nil
}
