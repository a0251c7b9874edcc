package llm

import (
	"reflect"
	"testing"
)

func TestBlocks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text, kind string
		want             []string
	}{
		{"one", "Here:\n```sql\nSELECT 1\n```\nDone.", "sql", []string{"SELECT 1"}},
		{"upper case tag", "```SQL\nSELECT 1\n```", "sql", []string{"SELECT 1"}},
		{"several", "```sql\nA\n```\ntext\n```sql\nB\n```", "sql", []string{"A", "B"}},
		{"other kinds skipped", "```json\n{}\n```\n```sql\nB\n```", "sql", []string{"B"}},
		{"missing closing fence", "```sql\nSELECT 1\nFROM t", "sql", []string{"SELECT 1\nFROM t"}},
		{"sqlite is not sql", "```sqlite\nSELECT 1\n```", "sql", nil},
		{"json", "```json\n{\"answer\": \"Y\"}\n```", "json", []string{`{"answer": "Y"}`}},
		{"csv", "```csv\na,b\n1,2\n```", "csv", []string{"a,b\n1,2"}},
		{"plaintext", "```plaintext\n3result.sql\n```", "plaintext", []string{"3result.sql"}},
		{"indented fences", "  ```sql\n  SELECT 1\n  ```", "sql", []string{"SELECT 1"}},
		{"backticks inside", "```sql\nSELECT `a` FROM t\n```", "sql", []string{"SELECT `a` FROM t"}},
		{"none", "no code here", "sql", nil},
		{"fence with trailing space", "```sql   \nSELECT 2\n```   \n", "sql", []string{"SELECT 2"}},
		{"empty block", "```sql\n```", "sql", []string{""}},
	}
	for _, tt := range tests {
		if got := Blocks(tt.text, tt.kind); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Blocks = %q, want %q", tt.name, got, tt.want)
		}
	}
}
