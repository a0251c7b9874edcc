package llmsim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
)

func demo(t *testing.T) *dataset.Dataset {
	t.Helper()
	ds, err := dataset.Load("../../examples/demo", dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func newSim(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Dataset == nil {
		cfg.Dataset = demo(t)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func post(t *testing.T, url string, body any) (*http.Response, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp, out
}

func content(t *testing.T, out map[string]any) string {
	t.Helper()
	ch, ok := out["choices"].([]any)
	if !ok || len(ch) == 0 {
		t.Fatalf("no choices in %v", out)
	}
	return ch[0].(map[string]any)["message"].(map[string]any)["content"].(string)
}

func generateBody(question string, seed int64) map[string]any {
	return map[string]any{"model": "gpt-4o", "seed": seed, "messages": []llm.Message{
		llm.User("DB info...\nTask: " + question + "\nPlease think step by step and " + MarkerGenerate + " in sqlite dialect."),
	}}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text string
		want Kind
	}{
		{"Task: x\nPlease think step by step and answer only one complete SQL in sqlite dialect", KindGenerate},
		{"Input sql:\nSELECT 1\nThe error information is:\nno such column\nPlease correct it and output only 1 complete SQL query.", KindRefine},
		{"Input sql:\nSELECT 1\nThe error information is: x\nPlease correct the SQL based on previous context", KindExploreCorrect},
		{"Write at most 10 sqlite SQL queries from simple to complex", KindExplore},
		{"SELECT a is corrected to SELECT b. Please correct other sqls if they have similar errors. SQLs: []", KindExploreFixOther},
		{"You are doing table level schema linking.", KindLink},
		{"Please give the simplest possible answer format", KindFormat},
		{"Please output one SQL only.", KindReaskSQL},
		{"Compare the candidate answers and choose one", KindVote},
		{"Here are the intermediate results of each CTE", KindCTERefine},
		{"Please check the answer again by reviewing task", KindSelfConsistency},
		{"what is the weather", KindUnknown},
	}
	for _, tt := range tests {
		if got := Classify(tt.text); got != tt.want {
			t.Errorf("Classify(%q) = %s, want %s", tt.text, got, tt.want)
		}
	}
}

func TestDeterministicAnswers(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts := newSim(t, Config{Dataset: ds, Seed: 7})
	_, ts2 := newSim(t, Config{Dataset: ds, Seed: 7})
	q := ds.Examples[10].Question
	_, a := post(t, ts.URL+"/v1/chat/completions", generateBody(q, 3))
	_, b := post(t, ts2.URL+"/v1/chat/completions", generateBody(q, 3))
	if content(t, a) != content(t, b) {
		t.Error("the same request got different answers from two simulators with one seed")
	}
	// Different request seeds vary the answers across candidates.
	seen := map[string]bool{}
	for seed := int64(0); seed < 12; seed++ {
		_, c := post(t, ts.URL+"/v1/chat/completions", generateBody(q, seed))
		seen[content(t, c)] = true
	}
	if len(seen) < 3 {
		t.Errorf("12 seeds gave only %d distinct answers", len(seen))
	}
	if m := a["model"].(string); !strings.Contains(m, "simulated") {
		t.Errorf("model field %q does not say it is a simulator", m)
	}
}

func TestAnswersAreSQLAboutTheExample(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	s, ts := newSim(t, Config{Dataset: ds, Seed: 1, Noise: Noise{Gold: 1, Fix: 1, ExploreRight: 1, Link: 1}})
	e, _ := ds.Example("local011")
	_, out := post(t, ts.URL+"/v1/chat/completions", generateBody(e.Question, 1))
	blocks := llm.Blocks(content(t, out), "sql")
	if len(blocks) != 1 || !strings.Contains(strings.ToLower(blocks[0]), "inventory") {
		t.Fatalf("generate answer %q, want the gold SQL over inventory", content(t, out))
	}
	_, out = post(t, ts.URL+"/v1/chat/completions", map[string]any{"model": "m", "messages": []llm.Message{
		llm.User("Task: " + e.Question + "\n" + MarkerExplore + " sqlite queries")}})
	ex := llm.Blocks(content(t, out), "sql")
	if len(ex) != 1 || strings.Count(ex[0], "LIMIT 20") < 3 || !strings.Contains(ex[0], "inventory") {
		t.Errorf("exploration answer %q", content(t, out))
	}
	_, out = post(t, ts.URL+"/v1/chat/completions", map[string]any{"model": "m", "messages": []llm.Message{
		llm.User("You are doing " + MarkerLink + ".\nTable full name: warehouses\nTask: " + e.Question)}})
	js := llm.Blocks(content(t, out), "json")
	var link struct {
		Answer  string   `json:"answer"`
		Columns []string `json:"columns"`
	}
	if len(js) != 1 || json.Unmarshal([]byte(js[0]), &link) != nil || link.Answer != "Y" || len(link.Columns) == 0 {
		t.Errorf("link answer %q", content(t, out))
	}
	_, out = post(t, ts.URL+"/v1/chat/completions", map[string]any{"model": "m", "messages": []llm.Message{
		llm.User("Task: " + e.Question + "\nPlease give the " + MarkerFormat)}})
	if csv := llm.Blocks(content(t, out), "csv"); len(csv) != 1 || csv[0] != "name,units" {
		t.Errorf("format answer %q", content(t, out))
	}
	_, _ = post(t, ts.URL+"/v1/chat/completions", map[string]any{"model": "m", "messages": []llm.Message{llm.User("hello")}})
	st := s.Stats()
	if st.ByKind[KindGenerate] != 1 || st.ByKind[KindExplore] != 1 || st.ByKind[KindLink] != 1 || st.Unknown != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestModelsStreamingAndAzurePath(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts := newSim(t, Config{Dataset: ds})
	resp, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "simulator") {
		t.Errorf("/v1/models %s", b)
	}
	body := generateBody(ds.Examples[0].Question, 1)
	body["stream"] = true
	body["stream_options"] = map[string]any{"include_usage": true}
	raw, _ := json.Marshal(body)
	resp, err = http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	s := string(b)
	if !strings.HasPrefix(s, "data: ") || !strings.Contains(s, "chat.completion.chunk") || !strings.Contains(s, `"usage"`) || !strings.HasSuffix(s, "data: [DONE]\n\n") {
		t.Errorf("stream:\n%s", s)
	}
	r, out := post(t, ts.URL+"/openai/deployments/gpt4/chat/completions?api-version=2024-05-01-preview", generateBody(ds.Examples[0].Question, 1))
	if r.StatusCode != 200 || content(t, out) == "" {
		t.Errorf("azure path: %d %v", r.StatusCode, out)
	}
}

func TestNewNeedsDataset(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "--dataset") {
		t.Errorf("err = %v", err)
	}
}
