package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/pkg/dataset"
)

// TestServeRerunsOfHostileSQLAreBounded runs quorum serve with
// --query-timeout 1s (issue 50): tenant a's reruns of a LIKE that SQLite
// would scan for minutes in one call come back as 400 naming the query
// stopped (or, past a's share of the rerun slots, as 429 naming that
// cap), and while they run tenant b's SELECT 1 is answered 200. The instr
// form that ran 209 s now answers at once.
func TestServeRerunsOfHostileSQLAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts quorum serve")
	}
	demoDS, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	llmURL, _ := countingSim(t, demoDS)
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("a:"+keyA+"\nb:"+keyB+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, s := startServe(t, "--dataset", demo, "--api-keys", keys, "--votes", "1", "--seed", "1", "--query-timeout", "1s",
		"--llm-base-url", llmURL, "--llm-api-key", "k", "--state-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--log-level", "error")
	a := &client{t: t, base: s.url, key: keyA}
	b := &client{t: t, base: s.url, key: keyB}
	e := demoDS.Examples[0]
	ask := map[string]any{"db": e.DB, "question": e.Question, "external_knowledge": e.ExternalKnowledge}
	qa, qb := a.ask(ask), b.ask(ask)
	a.wait(qa)
	b.wait(qb)

	const hostile = "SELECT hex(zeroblob(2097152)) LIKE '%'||hex(zeroblob(4000))||'x%' AS m"
	type reply struct {
		code int
		body string
	}
	replies := make(chan reply, 4)
	for range 4 {
		go func() {
			code, _, out := a.do("POST", "/v1/questions/"+qa+"/run", map[string]string{"sql": hostile})
			replies <- reply{code, string(out)}
		}()
	}
	// Over its share, a is refused at once; today nothing answered a
	// before its reruns ended, so b's rerun goes after 5s at the latest.
	var got []reply
	select {
	case r := <-replies:
		got = append(got, r)
	case <-time.After(5 * time.Second):
	}
	code, _, out := b.do("POST", "/v1/questions/"+qb+"/run", map[string]string{"sql": "SELECT 1 AS one"})
	if code != http.StatusOK {
		t.Errorf("tenant b's SELECT 1 while a's hostile reruns ran: %d %s, want 200", code, out)
	}
	for len(got) < 4 {
		got = append(got, <-replies)
	}
	stopped := 0
	for _, r := range got {
		switch {
		case r.code == http.StatusBadRequest && strings.Contains(r.body, "interrupted: the query ran longer than 1s"):
			stopped++
		case r.code == http.StatusTooManyRequests && strings.Contains(r.body, "tenant a already runs"):
		default:
			t.Errorf("tenant a's hostile rerun: %d %s, want 400 naming the query stopped or 429 naming the tenant's cap", r.code, r.body)
		}
	}
	if stopped == 0 {
		t.Error("none of tenant a's hostile reruns was run and stopped")
	}

	instr := fmt.Sprintf("SELECT instr(%s, %s||'x') AS i", "hex(zeroblob(1048576))", "hex(zeroblob(524288))")
	code, _, out = a.do("POST", "/v1/questions/"+qa+"/run", map[string]string{"sql": instr})
	var res struct{ Rows [][]string }
	if code != http.StatusOK || json.Unmarshal(out, &res) != nil || len(res.Rows) != 1 || res.Rows[0][0] != "0" {
		t.Errorf("instr of 2 MB for a 1 MB needle: %d %s, want 200 and 0 within the 1s timeout", code, out)
	}
}
