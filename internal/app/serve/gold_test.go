package serve

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/dataset"
)

// TestGoldCheck: an answer to one of the demo's questions is checked
// against its gold result by the benchmark's evaluator (right, and wrong
// when a value differs; a second gold variant counts); a question that is
// not exactly one of the dataset's (other words, other knowledge, another
// database, a follow-up) gets no check, nor does an answer whose table
// cannot be read.
func TestGoldCheck(t *testing.T) {
	ds, err := dataset.Load(openAPIDemo, dataset.Options{Catalogue: true})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{ds: ds, cfg: Config{Log: zap.NewNop()}}
	gold := filepath.Join(openAPIDemo, "evaluation_suite", "gold", "exec_result")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(gold, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	write := func(text string) string {
		p := filepath.Join(t.TempDir(), "answer.csv")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	channels := Question{ID: "q1", DB: "shop", Dialect: "sqlite", Question: "How many orders came through each sales channel?"}
	right := read("local005_a.csv")
	lines := strings.Split(strings.TrimSpace(right), "\n")
	if len(lines) < 3 {
		t.Fatalf("local005's gold has %d lines", len(lines))
	}
	// One count off by one: the benchmark's rules call it wrong.
	head, first := lines[0], lines[1]
	cut := strings.LastIndex(first, ",")
	wrong := strings.Join(append([]string{head, first[:cut+1] + "1" + first[cut+1:]}, lines[2:]...), "\n") + "\n"
	// The card share: two gold variants, the second also right.
	card := Question{ID: "q2", DB: "shop", Dialect: "sqlite", Question: "What percentage of payments were made by card? Round to 2 decimals."}

	for _, c := range []struct {
		name   string
		q      Question
		result string
		want   *GoldCheck
	}{
		{"right", channels, right, &GoldCheck{Example: "local005", Right: true}},
		{"wrong", channels, wrong, &GoldCheck{Example: "local005", Right: false}},
		{"the second gold variant", card, read("local012_b.csv"), &GoldCheck{Example: "local012", Right: true}},
		{"other words", with(channels, func(q *Question) { q.Question += " Thanks." }), right, nil},
		{"other knowledge", with(channels, func(q *Question) { q.ExternalKnowledge = "Count only web orders." }), right, nil},
		{"another dialect", with(channels, func(q *Question) { q.Dialect = "snowflake" }), right, nil},
		{"a follow-up", with(channels, func(q *Question) { q.FollowUpOf = "q0" }), right, nil},
		{"an unreadable answer", channels, "", nil},
	} {
		path := write(c.result)
		if c.result == "" {
			path = filepath.Join(t.TempDir(), "missing.csv")
		}
		if got := s.goldCheck(&c.q, path); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func with(q Question, change func(*Question)) Question {
	change(&q)
	return q
}

// TestOpenAPIGoldCheck: docs/openapi.yaml's GoldCheck is GoldCheck's JSON,
// every field required, and Question.gold refers to it.
func TestOpenAPIGoldCheck(t *testing.T) {
	doc := loadOpenAPI(t)
	sch := walk(t, doc, "components", "schemas", "GoldCheck")
	fields := jsonFields(reflect.TypeFor[GoldCheck]())
	props := asMap(t, sch["properties"], "GoldCheck.properties")
	if got, want := sortedKeys(props), sortedKeys(fields); !slices.Equal(got, want) {
		t.Errorf("GoldCheck has properties %v; GoldCheck's JSON fields are %v", got, want)
	}
	required := stringList(sch["required"])
	sort.Strings(required)
	if want := sortedKeys(fields); !slices.Equal(required, want) {
		t.Errorf("GoldCheck requires %v, want %v", required, want)
	}
	for name, f := range fields {
		if p, ok := props[name]; ok && schemaType(t, doc, p) != jsonType(f.typ) {
			t.Errorf("GoldCheck.%s is %q, the Go field encodes as %q", name, schemaType(t, doc, p), jsonType(f.typ))
		}
	}
	if ref, _ := walk(t, doc, "components", "schemas", "Question", "properties", "gold")["$ref"].(string); ref != "#/components/schemas/GoldCheck" {
		t.Errorf("Question.gold refers to %q, want the GoldCheck schema", ref)
	}
}
