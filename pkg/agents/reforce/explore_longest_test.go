package reforce

import "testing"

// TestLongestAnswer: an exploration correction keeps the longest block,
// as the reference does; on a tie the reply's own answer (the block its
// prose marks final, else the last), not a draft written before it.
func TestLongestAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"one block", "```sql\nSELECT a FROM t\n```", "SELECT a FROM t"},
		{"the longest", "```sql\nSELECT a FROM t\n```\n```sql\nSELECT a, b FROM t\n```", "SELECT a, b FROM t"},
		{"the longest, though first", "```sql\nSELECT a, b FROM t\n```\nor\n```sql\nSELECT a FROM t\n```", "SELECT a, b FROM t"},
		{"a tie: the last, not the draft", "Draft:\n```sql\nSELECT a FROM t LIMIT 22\n```\nFixed:\n```sql\nSELECT a FROM t LIMIT 20\n```", "SELECT a FROM t LIMIT 20"},
		{"a tie: the one marked final", "Final query:\n```sql\nSELECT a FROM t LIMIT 20\n```\nMy first attempt was:\n```sql\nSELECT a FROM t LIMIT 22\n```", "SELECT a FROM t LIMIT 20"},
	} {
		blocks := readBlocks(tc.text, "stop")
		if got := longestAnswer(blocks, tc.text, "stop"); got != tc.want {
			t.Errorf("%s: %q, want %q (blocks %q)", tc.name, got, tc.want, blocks)
		}
	}
}
