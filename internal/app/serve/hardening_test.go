package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/agents"
)

const (
	keyA = "tenant-a-key-0123456789"
	keyB = "tenant-b-key-0123456789"
)

// countHook counts the Redis commands a client sends (a pipeline's each).
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// redisServer is a Server over a real redis-server with tenants a and b,
// its Redis commands counted.
func redisServer(t *testing.T, lim HTTPLimits) (*Server, *countHook) {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	hook := &countHook{}
	rdb.AddHook(hook)
	tenants, err := ParseKeys(strings.NewReader("a:"+keyA+"\nb:"+keyB), "test")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Env: &runenv.Env{Agents: agents.Builtin(), State: runstate.New(rdb)}, Redis: rdb, Dataset: openAPIDemo,
		StateDir: t.TempDir(), Tenants: tenants, HTTP: lim})
	if err != nil {
		t.Fatal(err)
	}
	return s, hook
}

// storeQuestion stores a queued question of tenant's and returns its id.
func storeQuestion(t *testing.T, s *Server, tenant string) string {
	t.Helper()
	ctx := context.Background()
	id, err := s.ids.mint(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	q := &Question{ID: id, Status: Queued, Tenant: tenant, DB: "shop", Dialect: "sqlite", Question: "How many customers?", Agent: "reforce",
		Votes: 1, Example: "qx", Created: time.Now().UTC()}
	if err := s.store.put(ctx, q); err != nil {
		t.Fatal(err)
	}
	return id
}

func request(t *testing.T, h http.Handler, method, path, key, body string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	r.Header.Set("Authorization", "Bearer "+key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestIDLookupSamePath: another tenant's question and a question that
// does not exist are told apart by nothing: the same status, the same
// body (but the id), and the same Redis commands (none). The owner's
// lookups, found or not, make the same commands too.
func TestIDLookupSamePath(t *testing.T) {
	s, hook := redisServer(t, HTTPLimits{})
	h := s.Handler()
	aID := storeQuestion(t, s, "a")
	missingA, err := s.ids.mint(context.Background(), "a") // a's, never stored
	if err != nil {
		t.Fatal(err)
	}
	type look struct {
		code     int
		commands int64
		body     string
	}
	get := func(key, id string) look {
		before := hook.n.Load()
		w := request(t, h, "GET", "/v1/questions/"+id, key, "")
		return look{w.Code, hook.n.Load() - before, strings.ReplaceAll(w.Body.String(), id, "ID")}
	}
	for _, tc := range []struct {
		name   string
		x, y   look
		status int
	}{
		{"b reads a's question vs a missing one of a's", get(keyB, aID), get(keyB, missingA), http.StatusNotFound},
		{"b reads a's question vs a malformed id", get(keyB, aID), get(keyB, "q0123"), http.StatusNotFound},
		{"a reads its question vs its missing one", get(keyA, aID), get(keyA, missingA), 0},
	} {
		if tc.x.commands != tc.y.commands {
			t.Errorf("%s: %d Redis commands vs %d: the paths differ", tc.name, tc.x.commands, tc.y.commands)
		}
		if tc.status != 0 && (tc.x != tc.y || tc.x.code != tc.status) {
			t.Errorf("%s: answers differ or are not %d: %+v vs %+v", tc.name, tc.status, tc.x, tc.y)
		}
	}
	if l := get(keyB, aID); l.commands != 0 {
		t.Errorf("another tenant's id cost %d Redis commands, want 0 (decided by the tag)", l.commands)
	}
	if l := get(keyA, aID); l.code != http.StatusOK {
		t.Errorf("the owner reads its question: %d %s", l.code, l.body)
	}
}

// TestFieldNamesExact: JSON field names are matched exactly; a case
// variant of a known field is an unknown field.
func TestFieldNamesExact(t *testing.T) {
	s, _ := redisServer(t, HTTPLimits{})
	h := s.Handler()
	for _, tc := range []struct {
		body, field string
	}{
		{`{"DB":"shop","question":"How many customers?"}`, "DB"},
		{`{"db":"shop","Question":"How many customers?"}`, "Question"},
		{`{"db":"shop","question":"How many customers?","Votes":2}`, "Votes"},
		{`{"db":"shop","question":"How many customers?","colour":1}`, "colour"},
	} {
		w := request(t, h, "POST", "/v1/questions", keyA, tc.body)
		var e apiError
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != http.StatusBadRequest || e.Field != tc.field || !strings.Contains(e.Error, "unknown field") {
			t.Errorf("%s: %d %s, want 400 unknown field %q", tc.body, w.Code, w.Body, tc.field)
		}
	}
}

// TestStreamCaps: event streams are capped per tenant and in all, with
// 429, a JSON error and Retry-After beyond; many streams of one question
// share one poller.
func TestStreamCaps(t *testing.T) {
	s, _ := redisServer(t, HTTPLimits{MaxStreams: 3, MaxStreamsPerTenant: 2})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	aID, bID := storeQuestion(t, s, "a"), storeQuestion(t, s, "b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(key, id string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/v1/questions/"+id+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, tc := range []struct {
		key, id string
		code    int
		cap     string
	}{
		{keyA, aID, 200, ""}, {keyA, aID, 200, ""}, {keyA, aID, 429, "tenant"},
		{keyB, bID, 200, ""}, {keyB, bID, 429, "server"},
	} {
		res := open(tc.key, tc.id)
		if res.StatusCode != tc.code {
			t.Fatalf("a stream with key %s…: %s, want %d", tc.key[:8], res.Status, tc.code)
		}
		if tc.code == 200 {
			// The first event (the status) says the stream runs.
			line, err := bufio.NewReader(res.Body).ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "id: 1") {
				t.Fatalf("stream: first line %q, %v", line, err)
			}
			continue
		}
		var e apiError
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, tc.cap) || res.Header.Get("Retry-After") == "" {
			t.Errorf("refused stream: body %s, Retry-After %q: want a JSON error about the %s cap and Retry-After", b, res.Header.Get("Retry-After"), tc.cap)
		}
	}
	s.feeds.mu.Lock()
	feeds, users := len(s.feeds.byID), s.feeds.byID[aID].users
	s.feeds.mu.Unlock()
	if feeds != 2 || users != 2 {
		t.Errorf("%d feeds, %d streams on a's: want 2 feeds (one per question), a's shared by its 2 streams", feeds, users)
	}
}

// TestSlowClientsCut: a connection is not held by partial headers, a slow
// body or idling between requests.
func TestSlowClientsCut(t *testing.T) {
	s, _ := redisServer(t, HTTPLimits{ReadHeaderTimeout: 300 * time.Millisecond, BodyTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond})
	hs := s.HTTPServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	for _, tc := range []struct {
		name, send string
		want       string // what the server answers before closing ("" none)
	}{
		{"partial headers", "GET /healthz HTTP/1.1\r\nHost: x\r\n", ""},
		{"slow body", "POST /v1/questions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyA + "\r\nContent-Length: 100\r\n\r\n{\"db\":", "408"},
		{"idle keep-alive", "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "200"},
	} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		// The test's own bound, only against a hang: the check is who
		// closed the connection, not how fast. The server's 300ms limits
		// close it (ReadAll ends cleanly); this deadline firing first (a
		// timeout error) means the server held it.
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		if _, err := io.WriteString(c, tc.send); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(c) // returns when the server closes
		c.Close()
		if err != nil {
			t.Errorf("%s: the server did not close the connection: %v", tc.name, err)
		}
		status := ""
		if f := strings.Fields(string(got)); len(f) > 1 {
			status = f[1]
		}
		if status != tc.want {
			t.Errorf("%s: answered %q, want %q", tc.name, status, tc.want)
		}
	}
}

// TestHTTPLimitsDefaults pins the defaults docs/api.md states.
func TestHTTPLimitsDefaults(t *testing.T) {
	var l HTTPLimits
	l.defaults()
	want := HTTPLimits{ReadHeaderTimeout: 10 * time.Second, BodyTimeout: 30 * time.Second, WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute,
		StreamWriteTimeout: 30 * time.Second, MaxStreams: 1000, MaxStreamsPerTenant: 20}
	if l != want {
		t.Errorf("defaults %+v, want %+v", l, want)
	}
}
