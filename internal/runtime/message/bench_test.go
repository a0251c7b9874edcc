package message

import (
	"encoding/json"
	"testing"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/pkg/cost"
)

func BenchmarkMessageEncodeDecode(b *testing.B) {
	r := &CandidateResult{V: Version, Run: "run-20260101", Example: "sf_bq123", Round: 1, Index: 11,
		SQL: "SELECT a, b, COUNT(*) FROM t GROUP BY a, b ORDER BY 3 DESC LIMIT 10", Status: "ok", Rows: 10,
		CSVRef: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		Cost:   cost.Ledger{"generate": {LLMCalls: 3, Queries: 3}, "explore": {LLMCalls: 2, Queries: 9}}, Worker: "generator-1", Agent: "reforce"}
	for b.Loop() {
		data, err := json.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		var back CandidateResult
		if err := queue.Decode(data, &back); err != nil {
			b.Fatal(err)
		}
	}
}
