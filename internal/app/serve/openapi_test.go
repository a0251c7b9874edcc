package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"sigs.k8s.io/yaml"

	"github.com/quorumsql/quorum/internal/metrics"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/dataset"
)

// The documents these tests pin to the code.
const (
	openAPIFile = "../../../docs/openapi.yaml"
	apiDocFile  = "../../../docs/api.md"
	openAPIDemo = "../../../examples/demo"
	probeKey    = "probe-key-0123456789abcdef"
)

// TestOpenAPIRoutes: the routes the server registers (read from this
// package's source, with internal/metrics' health routes when Handler adds
// them) are exactly the operations docs/openapi.yaml documents, and each
// is named in docs/api.md. Every documented operation is then requested
// of a real Handler: it is routed (not the mux's own 404 or 405), and it
// asks for an API key exactly when the document says it does.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	registered := registeredRoutes(t)
	documented := map[string]map[string]any{} // "METHOD /path" → operation
	for path, item := range asMap(t, walk(t, doc, "paths"), "paths") {
		for method, op := range asMap(t, item, path) {
			if slices.Contains([]string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}, method) {
				documented[strings.ToUpper(method)+" "+path] = asMap(t, op, method+" "+path)
			}
		}
	}
	for _, r := range sortedKeys(registered) {
		if _, ok := documented[r]; !ok {
			t.Errorf("the server registers %q: document it in docs/openapi.yaml", r)
		}
	}
	for _, r := range sortedKeys(documented) {
		if !registered[r] {
			t.Errorf("docs/openapi.yaml documents %q, which the server does not register", r)
		}
	}
	md := readDoc(t)
	for _, r := range sortedKeys(registered) {
		if !strings.Contains(md, "`"+r+"`") {
			t.Errorf("docs/api.md does not name `%s`", r)
		}
	}

	s := probeServer(t)
	h := s.Handler()
	global := doc["security"]
	for _, r := range sortedKeys(documented) {
		op := documented[r]
		secured := nonEmpty(global)
		if sec, ok := op["security"]; ok {
			secured = nonEmpty(sec)
		}
		responses := asMap(t, op["responses"], r+" responses")
		if _, ok := responses["401"]; secured && !ok {
			t.Errorf("%s needs a key but documents no 401", r)
		}
		method, path, _ := strings.Cut(r, " ")
		path = strings.ReplaceAll(path, "{id}", "q00000000000000000000")
		for _, withKey := range []bool{false, true} {
			req := httptest.NewRequest(method, path, strings.NewReader("{}"))
			if withKey {
				req.Header.Set("Authorization", "Bearer "+probeKey)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			code, ctype := rec.Code, rec.Header().Get("Content-Type")
			t.Logf("%s (key %v): %d %s", r, withKey, code, ctype)
			if code == http.StatusMethodNotAllowed || (code == http.StatusNotFound && strings.HasPrefix(ctype, "text/plain")) {
				t.Errorf("%s (key %v): %d %q: the handler does not route it", r, withKey, code, strings.TrimSpace(rec.Body.String()))
				continue
			}
			switch {
			case !withKey && secured && code != http.StatusUnauthorized:
				t.Errorf("%s without a key: %d, want 401 (docs/openapi.yaml says it needs one)", r, code)
			case !withKey && !secured && code == http.StatusUnauthorized:
				t.Errorf("%s without a key: 401, but docs/openapi.yaml says it needs none (security: [])", r)
			case withKey && code == http.StatusUnauthorized:
				t.Errorf("%s with a key: 401", r)
			}
			if withKey && code != http.StatusOK {
				if _, ok := responses[strconv.Itoa(code)]; !ok {
					t.Errorf("%s answered %d, which docs/openapi.yaml does not list", r, code)
				}
			}
		}
	}
}

// TestOpenAPISchemas: the schemas' properties are the JSON field names of
// the types the handlers encode and decode; for responses, `required` is
// exactly the fields always present (no omitempty or omitzero); each
// property's type is the Go field's; the statuses and the limits are the
// code's.
func TestOpenAPISchemas(t *testing.T) {
	doc := loadOpenAPI(t)
	for _, c := range []struct {
		schema   string
		typ      reflect.Type
		response bool
	}{
		{"Question", reflect.TypeFor[Question](), true},
		{"Cost", reflect.TypeFor[Cost](), true},
		{"Database", reflect.TypeFor[Database](), true},
		{"Accepted", reflect.TypeFor[accepted](), true},
		{"Error", reflect.TypeFor[apiError](), true},
		{"AskRequest", reflect.TypeFor[askRequest](), false},
		{"RunRequest", reflect.TypeFor[runRequest](), false},
		{"RunResult", reflect.TypeFor[runResult](), true},
	} {
		sch := asMap(t, walk(t, doc, "components", "schemas", c.schema), c.schema)
		props := asMap(t, sch["properties"], c.schema+".properties")
		fields := jsonFields(c.typ)
		if got, want := sortedKeys(props), sortedKeys(fields); !slices.Equal(got, want) {
			t.Errorf("schema %s has properties %v; %s's JSON fields are %v", c.schema, got, c.typ, want)
		}
		required := stringList(sch["required"])
		for _, r := range required {
			if _, ok := props[r]; !ok {
				t.Errorf("schema %s requires %q, which it does not have", c.schema, r)
			}
		}
		if c.response {
			var always []string
			for name, f := range fields {
				if f.always {
					always = append(always, name)
				}
			}
			sort.Strings(always)
			sort.Strings(required)
			if !slices.Equal(required, always) {
				t.Errorf("schema %s requires %v; the fields %s always has (no omitempty/omitzero) are %v", c.schema, required, c.typ, always)
			}
		}
		for name, f := range fields {
			p, ok := props[name]
			if !ok {
				continue
			}
			if got, want := schemaType(t, doc, p), jsonType(f.typ); got != want {
				t.Errorf("%s.%s is %q in docs/openapi.yaml; the Go field (%s) encodes as %q", c.schema, name, got, f.typ, want)
			}
		}
	}
	if ap, ok := walk(t, doc, "components", "schemas", "AskRequest")["additionalProperties"].(bool); !ok || ap {
		t.Error("AskRequest: the server refuses unknown fields (DisallowUnknownFields): want additionalProperties: false")
	}

	status := stringList(walk(t, doc, "components", "schemas", "Status")["enum"])
	if want := []string{Queued, Running, Answered, Failed, Cancelled}; !slices.Equal(status, want) {
		t.Errorf("Status enum %v, want the code's %v", status, want)
	}

	ask := walk(t, doc, "components", "schemas", "AskRequest", "properties")
	for _, l := range []struct {
		prop, key string
		want      int
	}{
		{"votes", "maximum", MaxVotes},
		{"question", "maxLength", dataset.MaxQuestionBytes},
		{"external_knowledge", "maxLength", dataset.MaxKnowledgeBytes},
	} {
		if got, _ := asMap(t, ask[l.prop], l.prop)[l.key].(float64); int(got) != l.want {
			t.Errorf("AskRequest.%s.%s = %v, want %d", l.prop, l.key, got, l.want)
		}
	}
	if d, _ := walk(t, doc, "components", "responses", "PayloadTooLarge")["description"].(string); !strings.Contains(d, strconv.Itoa(MaxBodyBytes)) {
		t.Errorf("the 413 response %q does not say the limit, %d bytes", d, MaxBodyBytes)
	}
	s := probeServer(t)
	if d, _ := walk(t, doc, "components", "schemas", "Question", "properties", "rows")["description"].(string); !strings.Contains(d, strconv.Itoa(s.cfg.MaxRows)) {
		t.Errorf("Question.rows %q does not say the row cap, %d", d, s.cfg.MaxRows)
	}
}

// TestOpenAPIEvents: the server-sent events events.go sends are the ones
// docs/openapi.yaml lists (x-sse-events), each with the data it sends, and
// the ones docs/api.md's events table lists.
func TestOpenAPIEvents(t *testing.T) {
	doc := loadOpenAPI(t)
	media := walk(t, doc, "paths", "/v1/questions/{id}/events", "get", "responses", "200", "content", "text/event-stream")
	documented := asMap(t, media["x-sse-events"], "x-sse-events")

	sent := map[string]string{} // event → "map:k1,k2" or the schema its data is
	f := parseFile(t, "events.go")
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			var fun string
			switch f := n.Fun.(type) {
			case *ast.Ident:
				fun = f.Name
			case *ast.SelectorExpr: // f.send
				fun = f.Sel.Name
			}
			if fun != "send" || len(n.Args) != 2 {
				return true
			}
			name, ok := stringLit(n.Args[0])
			if !ok {
				return true // the final event: its names are the map below
			}
			switch d := n.Args[1].(type) {
			case *ast.CompositeLit:
				if _, isMap := d.Type.(*ast.MapType); isMap {
					sent[name] = "map:" + strings.Join(sortedKeys(litKeys(t, d)), ",")
				} else if id, ok := d.Type.(*ast.Ident); ok && id.Name == "apiError" {
					sent[name] = "Error"
				} else {
					t.Errorf("events.go: event %q: data %T the test does not know", name, d.Type)
				}
			default:
				t.Errorf("events.go: event %q: data the test does not know", name)
			}
		case *ast.CompositeLit:
			// map[string]string{Answered: "answer", ...}: the final events,
			// whose data is the question.
			if _, isMap := n.Type.(*ast.MapType); !isMap || len(n.Elts) == 0 {
				return true
			}
			for _, e := range n.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					return true
				}
				if id, ok := kv.Key.(*ast.Ident); !ok || !slices.Contains([]string{"Answered", "Failed", "Cancelled"}, id.Name) {
					return true
				}
			}
			for _, e := range n.Elts {
				if v, ok := stringLit(e.(*ast.KeyValueExpr).Value); ok {
					sent[v] = "Question"
				}
			}
		}
		return true
	})
	for _, want := range []string{"status", "answer", "failed", "cancelled"} {
		if _, ok := sent[want]; !ok {
			t.Fatalf("events.go: could not find the event %q (found %v): update the test", want, sortedKeys(sent))
		}
	}
	if got, want := sortedKeys(documented), sortedKeys(sent); !slices.Equal(got, want) {
		t.Errorf("x-sse-events lists %v; events.go sends %v", got, want)
	}
	for name, data := range sent {
		sch, ok := documented[name]
		if !ok {
			continue
		}
		ref, _ := asMap(t, sch, name)["$ref"].(string)
		if keys, isMap := strings.CutPrefix(data, "map:"); isMap {
			props := asMap(t, resolve(t, doc, sch)["properties"], name+" properties")
			if got := strings.Join(sortedKeys(props), ","); got != keys {
				t.Errorf("event %s: documented data fields %s; events.go sends %s", name, got, keys)
			}
			if got := strings.Join(sortedCopy(stringList(resolve(t, doc, sch)["required"])), ","); got != keys {
				t.Errorf("event %s: required %s; events.go always sends %s", name, got, keys)
			}
		} else if ref != "#/components/schemas/"+data {
			t.Errorf("event %s: data is %q in docs/openapi.yaml; events.go sends a %s", name, ref, data)
		}
	}

	table := tableNames(section(t, readDoc(t), "### `GET /v1/questions/{id}/events`"))
	if got, want := sortedKeys(table), sortedKeys(sent); !slices.Equal(got, want) {
		t.Errorf("docs/api.md's events table lists %v; events.go sends %v", got, want)
	}
}

// TestOpenAPIDocLimits: docs/api.md's limits table gives each limit with
// the code's value, the votes range and KiB figures agree with it
// everywhere, the question log table lists the fields logQuestion writes,
// and every status code the server answers with is documented in both
// documents.
func TestOpenAPIDocLimits(t *testing.T) {
	md := readDoc(t)
	s := probeServer(t)
	limits := section(t, md, "## Limits")
	for _, l := range []struct{ code, value string }{
		{"MaxBodyBytes", strconv.Itoa(MaxBodyBytes)},
		{"MaxVotes", fmt.Sprintf("1 to %d", MaxVotes)},
		{"dataset.MaxQuestionBytes", strconv.Itoa(dataset.MaxQuestionBytes)},
		{"dataset.MaxKnowledgeBytes", strconv.Itoa(dataset.MaxKnowledgeBytes)},
		{"MaxRows", strconv.Itoa(s.cfg.MaxRows)},
		{"store.ttl", fmt.Sprintf("%d days", s.store.ttl/(24*time.Hour))},
		{"leaseTTL", fmt.Sprintf("%d s", leaseTTL/time.Second)},
		{"eventPoll", fmt.Sprintf("%d ms", eventPoll/time.Millisecond)},
	} {
		row := ""
		for line := range strings.SplitSeq(limits, "\n") {
			if strings.HasPrefix(line, "|") && strings.Contains(line, "`"+l.code+"`") {
				row = line
			}
		}
		switch {
		case row == "":
			t.Errorf("docs/api.md's limits table has no row for `%s`", l.code)
		case !strings.Contains(row, l.value):
			t.Errorf("docs/api.md's limits row for `%s` does not say %q: %s", l.code, l.value, row)
		}
	}
	oa, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"docs/api.md": md, "docs/openapi.yaml": string(oa)} {
		for _, m := range regexp.MustCompile(`\b1 to (\d+)`).FindAllStringSubmatch(text, -1) {
			if m[1] != strconv.Itoa(MaxVotes) {
				t.Errorf("%s says %q; votes are 1 to %d", name, m[0], MaxVotes)
			}
		}
		for _, m := range regexp.MustCompile(`(\d+) bytes \((\d+) KiB\)`).FindAllStringSubmatch(text, -1) {
			b, _ := strconv.Atoi(m[1])
			k, _ := strconv.Atoi(m[2])
			if b != k<<10 {
				t.Errorf("%s says %q", name, m[0])
			}
		}
	}
	if want := fmt.Sprintf("the body is over %d bytes", MaxBodyBytes); !strings.Contains(md, want) && !strings.Contains(string(oa), want) {
		t.Errorf("neither document quotes the 413 error %q", want)
	}

	// The question log: the keys of logQuestion's map literal.
	logged := map[string]bool{}
	for _, d := range parseFile(t, "execute.go").Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "logQuestion" {
			ast.Inspect(fd, func(n ast.Node) bool {
				if cl, ok := n.(*ast.CompositeLit); ok {
					if _, isMap := cl.Type.(*ast.MapType); isMap {
						for k := range litKeys(t, cl) {
							logged[k] = true
						}
					}
				}
				return true
			})
		}
	}
	if len(logged) == 0 {
		t.Fatal("execute.go: logQuestion's fields not found: update the test")
	}
	if got, want := sortedKeys(tableNames(section(t, md, "## The question log"))), sortedKeys(logged); !slices.Equal(got, want) {
		t.Errorf("docs/api.md's question log table lists %v; logQuestion writes %v", got, want)
	}

	// Status codes: every http.StatusX the package (and the health routes)
	// answers with is in api.md's table and in some operation of openapi.
	doc := loadOpenAPI(t)
	inOpenAPI := map[string]bool{}
	for _, item := range asMap(t, doc["paths"], "paths") {
		for _, op := range asMap(t, item, "path item") {
			if m, ok := op.(map[string]any); ok {
				if rs, ok := m["responses"].(map[string]any); ok {
					for code := range rs {
						inOpenAPI[code] = true
					}
				}
			}
		}
	}
	inDoc := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\| (\d{3}) `).FindAllStringSubmatch(section(t, md, "## Status codes"), -1) {
		inDoc[m[1]] = true
	}
	for _, code := range statusCodes(t) {
		c := strconv.Itoa(code)
		if !inDoc[c] {
			t.Errorf("the server answers %d; docs/api.md's status code table does not list it", code)
		}
		if !inOpenAPI[c] {
			t.Errorf("the server answers %d; no operation of docs/openapi.yaml lists it", code)
		}
	}
}

// probeServer is a Server over the demo dataset whose Redis is never
// reached (its dialer fails at once): enough to route requests, to check
// keys and bodies, and to read the configuration's defaults.
func probeServer(t *testing.T) *Server {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:9", MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("no Redis in this test")
		}})
	t.Cleanup(func() { rdb.Close() })
	tenants, err := ParseKeys(strings.NewReader("probe:"+probeKey), "test")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Env: &runenv.Env{Agents: agents.Builtin()}, Redis: rdb, Dataset: openAPIDemo, StateDir: t.TempDir(),
		Tenants: tenants, Metrics: metrics.New("test")})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// registeredRoutes reads the patterns this package registers on a mux
// ("METHOD /path", "{$}" dropped), and internal/metrics' when it calls
// metrics.Handle.
func registeredRoutes(t *testing.T) map[string]bool {
	t.Helper()
	routes := map[string]bool{}
	withMetrics := "" // the internal/metrics function that registers routes
	collect := func(n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "metrics" && strings.HasPrefix(sel.Sel.Name, "Handle") {
				withMetrics = sel.Sel.Name // metrics.Handle or metrics.HandleHealth
				return true
			}
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") || len(call.Args) == 0 {
				return true
			}

			pattern, ok := stringLit(call.Args[0])
			if !ok {
				return true
			}
			method, path, ok := strings.Cut(pattern, " ")
			if !ok || strings.HasPrefix(method, "/") {
				t.Errorf("route %q has no method: give it one and document it", pattern)
				return true
			}
			routes[method+" "+strings.Replace(path, "{$}", "", 1)] = true
			return true
		})
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if !strings.HasSuffix(name, "_test.go") {
			collect(parseFile(t, name))
		}
	}
	if withMetrics != "" {
		// metrics.Handle calls HandleHealth: collect both when it is Handle.
		names := map[string]bool{withMetrics: true}
		if withMetrics == "Handle" {
			names["HandleHealth"] = true
		}
		for _, d := range parseFile(t, "../../metrics/metrics.go").Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && names[fd.Name.Name] {
				collect(fd)
			}
		}
	}
	if len(routes) == 0 {
		t.Fatal("no routes found in the source: update the test")
	}
	return routes
}

// statusCodes lists the http.StatusX constants this package's code and
// the health routes use.
func statusCodes(t *testing.T) []int {
	t.Helper()
	byName := map[string]int{}
	for code := 100; code < 600; code++ {
		if text := http.StatusText(code); text != "" {
			byName["Status"+strings.NewReplacer(" ", "", "-", "", "'", "").Replace(text)] = code
		}
	}
	seen := map[int]bool{}
	files, _ := filepath.Glob("*.go")
	files = append(files, "../../metrics/metrics.go")
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		ast.Inspect(parseFile(t, name), func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "http" || !strings.HasPrefix(sel.Sel.Name, "Status") || sel.Sel.Name == "StatusText" {
				return true
			}
			code, ok := byName[sel.Sel.Name]
			if !ok {
				t.Errorf("%s uses http.%s, whose code the test cannot tell: map it", name, sel.Sel.Name)
				return true
			}
			seen[code] = true
			return true
		})
	}
	var codes []int
	for c := range seen {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	return codes
}

// field is one JSON field of a type.
type field struct {
	typ    reflect.Type
	always bool // no omitempty or omitzero
}

// jsonFields are the fields encoding/json reads and writes for t.
func jsonFields(t reflect.Type) map[string]field {
	out := map[string]field{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		o := strings.Split(opts, ",")
		out[name] = field{typ: f.Type, always: !slices.Contains(o, "omitempty") && !slices.Contains(o, "omitzero")}
	}
	return out
}

// jsonType is the JSON Schema type a Go type encodes as.
func jsonType(t reflect.Type) string {
	if t == reflect.TypeFor[time.Time]() {
		return "string"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonType(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	default:
		return "object" // maps and structs
	}
}

// schemaType is a schema's type, its $ref followed.
func schemaType(t *testing.T, doc map[string]any, s any) string {
	typ, _ := resolve(t, doc, s)["type"].(string)
	return typ
}

func loadOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatalf("%s: %v", openAPIFile, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(j, &doc); err != nil {
		t.Fatalf("%s: %v", openAPIFile, err)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Fatalf("%s: openapi %q, want 3.1.x", openAPIFile, v)
	}
	return doc
}

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(apiDocFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// walk follows keys from v, failing when one is missing.
func walk(t *testing.T, v any, keys ...string) map[string]any {
	t.Helper()
	for i, k := range keys {
		m := asMap(t, v, strings.Join(keys[:i], "."))
		next, ok := m[k]
		if !ok {
			t.Fatalf("docs/openapi.yaml: no %s", strings.Join(keys[:i+1], "."))
		}
		v = next
	}
	return asMap(t, v, strings.Join(keys, "."))
}

func asMap(t *testing.T, v any, what string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("docs/openapi.yaml: %s is %T, want an object", what, v)
	}
	return m
}

// resolve follows a local $ref.
func resolve(t *testing.T, doc map[string]any, s any) map[string]any {
	t.Helper()
	m := asMap(t, s, "schema")
	ref, ok := m["$ref"].(string)
	if !ok {
		return m
	}
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		t.Fatalf("docs/openapi.yaml: $ref %q is not local", ref)
	}
	return walk(t, doc, strings.Split(path, "/")...)
}

func nonEmpty(v any) bool { l, ok := v.([]any); return ok && len(l) > 0 }

func stringList(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

func parseFile(t *testing.T, name string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// litKeys are a map literal's string keys.
func litKeys(t *testing.T, cl *ast.CompositeLit) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for _, e := range cl.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if k, ok := stringLit(kv.Key); ok {
			keys[k] = true
		} else {
			t.Errorf("a map literal key the test cannot read: %T", kv.Key)
		}
	}
	return keys
}

// section is a Markdown section: its heading line up to the next heading
// of the same or a higher level (headings in code blocks do not count).
func section(t *testing.T, md, heading string) string {
	t.Helper()
	level := strings.IndexFunc(heading, func(r rune) bool { return r != '#' })
	var out []string
	in, fence := false, false
	for line := range strings.SplitSeq(md, "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if !fence && strings.HasPrefix(line, "#") {
			n := strings.IndexFunc(line, func(r rune) bool { return r != '#' })
			if in && n > 0 && n <= level && strings.HasPrefix(line[n:], " ") {
				break
			}
			if line == heading {
				in = true
			}
		}
		if in {
			out = append(out, line)
		}
	}
	if !in {
		t.Fatalf("docs/api.md has no section %q", heading)
	}
	return strings.Join(out, "\n")
}

// tableNames are the `names` in the first column of a section's tables.
func tableNames(sec string) map[string]bool {
	names := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(sec, -1) {
		names[m[1]] = true
	}
	return names
}
