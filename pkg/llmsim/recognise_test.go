package llmsim

import "testing"

// TestIsNoAnswer: the no-answer query is recognised however an agent
// wrote it back, and nothing else is.
func TestIsNoAnswer(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want bool
	}{
		{NoAnswerSQL, true},
		{"--Description: none\n" + NoAnswerSQL + ";", true},
		{"select  'the simulator has no answer for this question'\n  as LLMSIM_NO_ANSWER", true},
		{"SELECT 1", false},
		{"SELECT 'the simulator has no answer for this question' AS answer", false},
		{"SELECT 'something else' AS llmsim_no_answer", false},
		{NoAnswerSQL + " FROM orders", false},
	} {
		if got := IsNoAnswer(c.sql); got != c.want {
			t.Errorf("IsNoAnswer(%q) = %v, want %v", c.sql, got, c.want)
		}
	}
}
