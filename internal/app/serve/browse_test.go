package serve

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// TestVendoredChartLibrary: the embedded charting library is byte for byte
// the pinned npm package's files (web/vendor/PIN, which make web-vendor
// checks against the registry), with its licence; it is served from this
// origin as a script, and nothing else under /assets/ is.
func TestVendoredChartLibrary(t *testing.T) {
	pin, err := os.Open("web/vendor/PIN")
	if err != nil {
		t.Fatal(err)
	}
	defer pin.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(pin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && !strings.HasPrefix(f[0], "#") && f[0] != "package" {
			sums[f[1]] = f[0]
		}
	}
	if len(sums) != 3 {
		t.Fatalf("PIN lists %d files, want the script, the style and the licence: %v", len(sums), sums)
	}
	for name, want := range sums {
		b, err := vendor.ReadFile("web/vendor/" + name)
		if err != nil {
			t.Fatalf("%s is not embedded: %v", name, err)
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != want {
			t.Errorf("%s: sha256 %x, PIN says %s (run make web-vendor)", name, got, want)
		}
	}
	lic, _ := vendor.ReadFile("web/vendor/LICENSE.uPlot")
	if !strings.Contains(string(lic), "MIT License") {
		t.Error("the vendored licence is not MIT's")
	}
	h := probeServer(t).Handler()
	for path, want := range map[string]int{"/assets/uPlot.iife.min.js": 200, "/assets/uPlot.min.css": 200, "/assets/PIN": 404, "/assets/..%2Fpage.go": 404} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d", path, rec.Code, want)
		}
		if want == 200 && rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", path)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/assets/uPlot.iife.min.js", nil))
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
		t.Errorf("the script's Content-Type is %q", ct)
	}
}

// TestExampleQuestionsFromTheSchema: with a real model, the example
// questions are written from the tables and columns, once, and name them.
func TestExampleQuestionsFromTheSchema(t *testing.T) {
	s := probeServer(t)
	h := s.Handler()
	get := func() exampleSet {
		req := httptest.NewRequest(http.MethodGet, "/v1/databases/shop/examples", nil)
		req.Header.Set("Authorization", "Bearer "+probeKey)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("GET examples: %d %s", rec.Code, rec.Body)
		}
		var set exampleSet
		if err := json.Unmarshal(rec.Body.Bytes(), &set); err != nil {
			t.Fatal(err)
		}
		return set
	}
	set := get()
	if set.Source != "schema" || len(set.Questions) == 0 || len(set.Questions) > MaxExampleQuestions {
		t.Fatalf("examples: %+v, want 1 to %d written from the schema", set, MaxExampleQuestions)
	}
	tables, err := tablesOf(s.dbs[0].db)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range set.Questions {
		named := false
		for _, tb := range tables {
			named = named || strings.Contains(q, strings.ReplaceAll(tb.Name, "_", " "))
		}
		if !named {
			t.Errorf("example %q names no table", q)
		}
	}
	s.examples.mu.Lock()
	n := len(s.examples.byDB)
	s.examples.mu.Unlock()
	if again := get(); n != 1 || strings.Join(again.Questions, "|") != strings.Join(set.Questions, "|") {
		t.Errorf("the examples were not kept: %d cached, %v then %v", n, set.Questions, again.Questions)
	}
	t.Logf("examples from the schema: %q", set.Questions)
	for path, want := range map[string]int{"/v1/databases/nope/examples": 404, "/v1/databases/shop/schema": 200} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer "+probeKey)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("GET %s: %d %s, want %d", path, rec.Code, rec.Body, want)
		}
	}
}
