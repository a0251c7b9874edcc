package llmsim

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"testing"
)

// The canonical golden file pins llmsim's default replies byte for byte: a
// persona (or any other change) must not shift what existing fixtures and
// benchmarks see. Each record is a request the package's tests sent (its
// simulator seed and noise, its body) and the reply's body with the
// per-call id and timestamp blanked.
var (
	updateGolden = flag.Bool("update-golden", false, "rewrite testdata/canonical.jsonl.gz from -golden-from")
	goldenFrom   = flag.String("golden-from", "", "JSON lines of recorded requests (seed, noise, body) to build the golden file from")
	goldenFile   = flag.String("golden-file", "testdata/canonical.jsonl.gz", "the golden file to check")
	goldenPer    = flag.Int("golden-per-kind", 6, "records kept per kind by -update-golden")
	goldenMax    = flag.Int("golden-max-bytes", 24<<10, "the largest request body -update-golden keeps")
)

type goldenRecord struct {
	Seed  uint64          `json:"seed"`
	Noise Noise           `json:"noise"`
	Body  json.RawMessage `json:"body"`
	Reply string          `json:"reply,omitempty"`
	// Status is the reply's HTTP status.
	Status int `json:"status,omitempty"`
}

var volatile = regexp.MustCompile(`"(id|created)":("chatcmpl-llmsim-\d+"|\d+)`)

// replay sends a recorded request to a fresh simulator with the record's
// seed and noise (no latency, limits or faults) and returns the reply's
// status and normalised body.
func replay(t *testing.T, sims map[string]*httptest.Server, rec goldenRecord) (int, string) {
	t.Helper()
	key, _ := json.Marshal([]any{rec.Seed, rec.Noise})
	ts, ok := sims[string(key)]
	if !ok {
		ts = httptest.NewServer(mustNew(t, Config{Dataset: demo(t), Seed: rec.Seed, Noise: rec.Noise}))
		t.Cleanup(ts.Close)
		sims[string(key)] = ts
	}
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(rec.Body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, volatile.ReplaceAllString(string(b), `"$1":0`)
}

func mustNew(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readRecords(t *testing.T, path string) []goldenRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("golden %s: %v", path, err)
	}
	defer f.Close()
	var r io.Reader = f
	if bytes.HasSuffix([]byte(path), []byte(".gz")) {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("golden %s: %v", path, err)
		}
		r = zr
	}
	var out []goldenRecord
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var rec goldenRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("golden %s: %v", path, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("golden %s: %v", path, err)
	}
	return out
}

// pickGolden keeps a spread of the recorded requests: up to perKind of
// each kind with and without tools, and every streamed one.
func pickGolden(recs []goldenRecord, perKind, maxBytes int) []goldenRecord {
	seen := map[string]bool{}
	per := map[string]int{}
	var out []goldenRecord
	for _, rec := range recs {
		if len(rec.Body) > maxBytes || seen[string(rec.Body)] {
			continue
		}
		seen[string(rec.Body)] = true
		var req chatRequest
		if json.Unmarshal(rec.Body, &req) != nil || len(req.Messages) == 0 {
			continue
		}
		key := string(ClassifyConversation(req.messages()))
		if len(req.Tools) > 0 {
			key += "+tools"
		}
		if req.Stream {
			key += "+stream"
		}
		if req.Stop != nil || req.maxTokens() > 0 || req.ContinueFinal {
			key += "+cut"
		}
		if per[key] < perKind {
			per[key]++
			out = append(out, rec)
		}
	}
	return out
}

func TestCanonicalGolden(t *testing.T) {
	t.Parallel()
	sims := map[string]*httptest.Server{}
	if *updateGolden {
		recs := readRecords(t, *goldenFrom)
		picked := pickGolden(recs, *goldenPer, *goldenMax)
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		for _, rec := range picked {
			rec.Status, rec.Reply = replay(t, sims, rec)
			line, _ := json.Marshal(rec)
			zw.Write(append(line, '\n'))
		}
		zw.Close()
		if err := os.WriteFile(*goldenFile, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d records to %s", len(picked), *goldenFile)
		return
	}
	recs := readRecords(t, *goldenFile)
	if len(recs) < 50 && *goldenFile == "testdata/canonical.jsonl.gz" {
		t.Fatalf("golden %s has %d records, want a spread of at least 50", *goldenFile, len(recs))
	}
	kinds := map[Kind]bool{}
	diffs := 0
	for i, rec := range recs {
		status, reply := replay(t, sims, rec)
		var req chatRequest
		_ = json.Unmarshal(rec.Body, &req)
		kinds[ClassifyConversation(req.messages())] = true
		if status != rec.Status || reply != rec.Reply {
			if diffs++; diffs <= 5 {
				t.Errorf("record %d (%s): status %d reply\n%s\nwant status %d reply\n%s", i, ClassifyConversation(req.messages()), status, reply, rec.Status, rec.Reply)
			}
		}
	}
	if diffs > 0 {
		t.Errorf("%d of %d canonical replies changed", diffs, len(recs))
	}
	var names []string
	for k := range kinds {
		names = append(names, string(k))
	}
	sort.Strings(names)
	t.Logf("%d records over kinds %v", len(recs), names)
}
