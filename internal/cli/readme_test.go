package cli

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADMERenders: the README's code fences are balanced (an odd one
// turns the rest of a section into code), and it starts with the two
// commands a new user types.
func TestREADMERenders(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	fence := regexp.MustCompile("^\\s*(```|~~~)")
	open := 0
	for i, line := range strings.Split(string(b), "\n") {
		if fence.MatchString(line) {
			if open == 0 {
				open = i + 1
			} else {
				open = 0
			}
		}
	}
	if open != 0 {
		t.Errorf("README.md: the code fence opened at line %d is never closed", open)
	}
	head := string(b[:min(len(b), 300)])
	if !strings.Contains(head, "make demo") || !strings.Contains(head, "make test") {
		t.Errorf("README.md does not start with make demo and make test:\n%s", head)
	}
}
