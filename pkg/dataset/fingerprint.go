package dataset

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
)

// Fingerprint names what examples ids of ds ask, so two runs' reports say
// whether they answered the same questions: a SHA-256 over each example's
// id, database, dialect, question and external knowledge, in id order
// (16 hex digits). The databases' contents and the gold are not in it;
// an id ds lacks counts as its id alone.
func (ds *Dataset) Fingerprint(ids []string) string {
	byID := make(map[string]*Example, len(ds.Examples))
	for _, e := range ds.Examples {
		byID[e.ID] = e
	}
	h := sha256.New()
	for _, id := range slices.Sorted(slices.Values(ids)) {
		e := byID[id]
		if e == nil {
			fmt.Fprintf(h, "%d:%s|-\n", len(id), id)
			continue
		}
		for _, f := range []string{e.ID, e.DB, string(e.Dialect), e.Question, e.ExternalKnowledge} {
			fmt.Fprintf(h, "%d:%s|", len(f), f)
		}
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
