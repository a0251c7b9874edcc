package pyrepr

import (
	"math"
	"testing"
)

func TestFloat(t *testing.T) {
	t.Parallel()
	// Expected values are CPython 3.11 repr() output.
	tests := []struct {
		in   float64
		want string
	}{
		{1, "1.0"},
		{0.1, "0.1"},
		{1e-05, "1e-05"},
		{0.0001, "0.0001"},
		{1e16, "1e+16"},
		{1e15, "1000000000000000.0"},
		{1.2345678901234568e+17, "1.2345678901234568e+17"},
		{123.456, "123.456"},
		{-2.5, "-2.5"},
		{1000000, "1000000.0"},
		{math.Inf(1), "inf"},
		{math.Inf(-1), "-inf"},
		{math.Copysign(0, -1), "-0.0"},
		{0, "0.0"},
		{math.NaN(), "nan"},
		{1.5e-07, "1.5e-07"},
		{1.23e+102, "1.23e+102"},
		{0.30000000000000004, "0.30000000000000004"},
		{9999999999999998, "9999999999999998.0"},
		{12.0, "12.0"},
		{0.00012, "0.00012"},
	}
	for _, tt := range tests {
		if got := Float(tt.in); got != tt.want {
			t.Errorf("Float(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []byte
		want string
	}{
		{[]byte("abc"), `b'abc'`},
		{[]byte{0, 1, 0xff}, `b'\x00\x01\xff'`},
		{[]byte("it's"), `b"it's"`},
		{[]byte("a\nb\\"), `b'a\nb\\'`},
	}
	for _, tt := range tests {
		if got := Bytes(tt.in); got != tt.want {
			t.Errorf("Bytes(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`[{"b": 1, "a": 2.0, "c": "x", "d": null, "e": true}]`, `[{'b': 1, 'a': 2.0, 'c': 'x', 'd': None, 'e': True}]`},
		{`{"s": "it's", "n": [1, 1.5e-07, -0.0]}`, `{'s': "it's", 'n': [1, 1.5e-07, -0.0]}`},
		{`"a\nb\\c\u0001"`, `'a\nb\\c\x01'`},
		{`{"q": "say \"hi\" it's"}`, `{'q': 'say "hi" it\'s'}`},
		{`[]`, `[]`},
		{`"café"`, `'café'`},
	}
	for _, tt := range tests {
		got, err := JSON([]byte(tt.in))
		if err != nil || got != tt.want {
			t.Errorf("JSON(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	if got := List([]string{"a", "b'c"}); got != `['a', "b'c"]` {
		t.Errorf("List = %s", got)
	}
}
