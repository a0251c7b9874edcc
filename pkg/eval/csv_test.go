package eval

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// TestNumberTextMatchesPandasPatterns: the written-out field matchers
// accept exactly what pandas' patterns accept, on the edge cases and on
// random strings over the characters that matter.
func TestNumberTextMatchesPandasPatterns(t *testing.T) {
	t.Parallel()
	patterns := []struct {
		name  string
		re    *regexp.Regexp
		match func(string) bool
	}{
		{"int", regexp.MustCompile(`^[ \t]*[+-]?[0-9]+[ \t]*$`), isIntText},
		{"float", regexp.MustCompile(`^[ \t]*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[ \t]*$`), isFloatText},
		{"inf", regexp.MustCompile(`^[+-]?(?i:inf|infinity)$`), isInfText},
	}
	cases := []string{"", " ", "1", "+1", "-1", "+-1", " 1 ", "\t-12\t", "1 2", "1.", ".5", ".", "-.5", "+.", "1.5e3", "1e", "1e+",
		"1E-7", "e5", ".e5", "1.e5", " 1.5 ", "1..5", "inf", "-Infinity", "INF", " inf", "+inFiNiTy", "infin", "nan", "1_000", "٣"}
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("0123456789+-.eE \tinfINFty")
	for range 20000 {
		b := make([]byte, r.IntN(8))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, p := range patterns {
		for _, c := range cases {
			if got, want := p.match(c), p.re.MatchString(c); got != want {
				t.Errorf("%s %q: %v, the pattern says %v", p.name, c, got, want)
			}
		}
	}
}
