package llmsim

import (
	"fmt"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	rd "github.com/quorumsql/quorum/pkg/reply"
)

// TestPersonasReadByTheReader: under every persona but the truncating
// one, the one reader the agents use (pkg/reply) reads each single-SQL
// reply as the canonical reply's answer, or the reply is a refusal the
// simulator sent; nothing else is read as a query.
func TestPersonasReadByTheReader(t *testing.T) {
	t.Parallel()
	ds, canon, canonURL, urls := personaSims(t)
	seeds := int64(8)
	if raceEnabled {
		seeds = 2
	}
	for _, p := range PersonaNames() {
		if p == PersonaCanonical || p == PersonaTruncating || p == PersonaO3 {
			continue // o3 refuses the sampling parameters these requests send
		}
		for _, pc := range personaCases() {
			if !pc.single {
				continue
			}
			for _, e := range []*dataset.Example{ds.Examples[0], ds.Examples[10], ds.Examples[20], ds.Examples[30]} {
				for seed := int64(0); seed < seeds; seed++ {
					body := pc.body(canon, e, seed)
					want, got := askRaw(t, canonURL, body), askRaw(t, urls[p], body)
					label := fmt.Sprintf("%s %s %s seed %d", p, pc.name, e.ID, seed)
					w, err := rd.SQL(want.text(), "")
					if err != nil {
						t.Fatalf("%s: canonical reply unread: %v\n%q", label, err, want.text())
					}
					g, err := rd.SQLWithReasoning(got.text(), got.reasoning, "")
					switch {
					case isRefusalText(got.text()) || isRefusalText(got.reasoning):
						if !rd.IsRefusal(err) {
							t.Errorf("%s: a refusal read as %q (%v)\n%q", label, g, err, got.text())
						}
					case err != nil || rd.Key(g) != rd.Key(w):
						t.Errorf("%s: read %q (%v), canonical's answer %q\nreply %q\nreasoning %q", label, g, err, w, got.text(), got.reasoning)
					}
				}
			}
		}
	}
}
