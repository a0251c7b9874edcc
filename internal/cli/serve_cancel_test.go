package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/app/serve"
	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// TestServeCancelsLeaveNothing asks questions of the quorum binary and
// cancels them, again and again, and checks that the process ends with the
// goroutines it had (its /metrics), the cluster with the coordinator
// consumers it had (NATS) and Redis with the keys without expiry it had.
// A held question's LLM call never answers, so one cancelled after its
// run's consumer appears is cancelled while it runs; every fifth is
// cancelled at once after its POST; every tenth cycle asks a demo
// question that llmsim answers instead (cache off), so answers go through
// the same process. internal/app/serve's TestCancelLeavesNothing checks
// the same of the serve assembly in process, with each cancel's order;
// this is the process a user runs. QUORUM_CANCEL_CYCLES sets the cycles
// (make slow: 2,000, where RSS must also level off).
func TestServeCancelsLeaveNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds quorum and runs it against NATS and redis-server")
	}
	n := 100
	if v, err := strconv.Atoi(os.Getenv("QUORUM_CANCEL_CYCLES")); err == nil && v > 0 {
		n = v
	}
	ns, rs := natstest.Start(t), redistest.Start(t)
	red := rs.Client(t)
	demoDS, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: demoDS, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var held atomic.Int64
	llm := brokenEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body) // read to the end, or the server never sees the client go
		if !bytes.Contains(b, []byte(heldMark)) {
			r.Body = io.NopCloser(bytes.NewReader(b))
			sim.ServeHTTP(w, r)
			return
		}
		held.Add(1)
		<-r.Context().Done() // never answers: the question runs until cancelled
	})
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", killFreePort(t))
	_, s := startServe(t, "--dataset", demo, "--no-auth", "--votes", "2", "--cache-ttl", "0",
		"--llm-base-url", llm, "--llm-api-key", "k", "--nats-url", ns.URL(), "--redis-url", rs.URL(),
		"--http-addr", metricsAddr, "--state-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--log-level", "error")
	c := &client{t: t, base: s.url}
	js := jetStream(t, ns.URL())
	m := &metricsReader{t: t, url: "http://" + metricsAddr + "/metrics"}

	answered := 0
	cycle := func(i int) {
		if i%10 == 9 {
			e := demoDS.Examples[i/10%len(demoDS.Examples)]
			if q := c.wait(c.ask(map[string]any{"db": e.DB, "question": e.Question})); q.Status != serve.Answered {
				t.Fatalf("demo question %s: %s %s, want answered", e.ID, q.Status, q.Error)
			}
			answered++
			return
		}
		id := c.ask(map[string]any{"db": "shop", "question": fmt.Sprintf("How many customers does the shop have? %s %d", heldMark, i)})
		if i%5 != 0 {
			wait.For(t, time.Minute, "question "+id+"'s run to start", func() bool { return coordinatorConsumers(t, js)[coordinator.ConsumerName(id)] })
		}
		if i == 1 { // one is cancelled while it waits for the LLM
			wait.For(t, time.Minute, "question "+id+"'s LLM call", func() bool { return held.Load() > 0 })
		}
		if code, _, out := c.do("DELETE", "/v1/questions/"+id, nil); code != http.StatusOK {
			t.Fatalf("DELETE question %s: %d %s", id, code, out)
		}
	}
	idle := func() {
		wait.For(t, time.Minute, "every question's driver to return", func() bool { return m.value("quorum_serve_questions_running") == 0 })
		// A cancelled question stays in the settle set until its tasks
		// have stopped and their late costs are charged (every 2 s): the
		// set's key comes and goes with them. One that never leaves is a
		// leak, and fails here.
		wait.For(t, 2*time.Minute, "every cancelled question settled", func() bool {
			return red.ZCard(context.Background(), rdb.SettleKey).Val() == 0
		})
	}
	for i := range 10 { // warm: pools, connections, the schema, one answer
		cycle(i)
	}
	idle()
	consumersBefore, keysBefore := len(coordinatorConsumers(t, js)), persistentKeys(t, red)
	before := m.value("go_goroutines")
	// RSS at each quarter of the cycles: a leak grows it in every
	// quarter, a process at its plateau only in the first.
	rss := []int{m.value("process_resident_memory_bytes")}
	for i := range n {
		cycle(100 + i)
		if (i+1)%(max(n/4, 1)) == 0 {
			rss = append(rss, m.value("process_resident_memory_bytes"))
		}
	}
	idle()
	after := before
	// Back to the start, or near it: what is on its way out (a fetch, a
	// closing connection) is given a while; a leak waits it out.
	wait.Until(15*time.Second, func() bool { after = m.value("go_goroutines"); return after <= before })
	consumersAfter, keysAfter := len(coordinatorConsumers(t, js)), persistentKeys(t, red)
	t.Logf("%d cycles through the binary (%d answered, %d LLM calls cancelled): goroutines %d -> %d, coordinator consumers %d -> %d, keys without expiry %d -> %d %q, RSS by quarter %s MiB",
		n, answered, held.Load(), before, after, consumersBefore, consumersAfter, len(keysBefore), len(keysAfter), slices.Sorted(maps.Keys(keysAfter)), mibs(rss))
	if consumersAfter != consumersBefore {
		t.Errorf("%d cancels left %d coordinator consumers (had %d)", n, consumersAfter, consumersBefore)
	}
	if after > before+goroutineSlack {
		t.Errorf("%d cancels left serve with %d goroutines more (%d -> %d)", n, after-before, before, after)
	}
	// A key without expiry that was there before may go (a limit's
	// counter emptied); one that was not is what a cancel left behind.
	var left []string
	for k := range keysAfter {
		if !keysBefore[k] {
			left = append(left, k)
		}
	}
	if len(left) > 0 {
		slices.Sort(left)
		t.Errorf("%d cancels left %d Redis keys without expiry that were not there before: %q (before: %q)", n, len(left), left, slices.Sorted(maps.Keys(keysBefore)))
	}
	if n >= rssPlateauCycles && len(rss) == 5 {
		if grew, bound := rss[4]-rss[2], rssPerCycle*n/2; grew > bound {
			t.Errorf("RSS grew %.1f MiB over the last %d cycles (bound %.1f MiB, %d KiB a cycle): still growing after the first half, by quarter %s MiB",
				mib(grew), n/2, mib(bound), rssPerCycle>>10, mibs(rss))
		}
	}
}

// heldMark in a question makes the test's endpoint hold its LLM calls.
const heldMark = "(held)"

// rssPlateauCycles is the soak's length from which RSS is checked: by
// then the process is past its warm-up (pools, buffers, the heap's goal),
// and a leak of rssPerCycle bytes a question shows above the noise of a
// garbage collection.
const (
	rssPlateauCycles = 1000
	rssPerCycle      = 16 << 10
)

func mib(b int) float64 { return float64(b) / (1 << 20) }

// mibs formats byte counts as MiB, "a -> b -> c".
func mibs(bs []int) string {
	s := make([]string, len(bs))
	for i, b := range bs {
		s[i] = strconv.FormatFloat(mib(b), 'f', 1, 64)
	}
	return strings.Join(s, " -> ")
}

// goroutineSlack is how many goroutines more than at the start still count
// as flat: a fetch or a closing connection may be on its way out. A
// consumer left behind costs a NATS client goroutines of its own, and each
// leaking cancel adds its own: a leak in one cancel of ten passes it.
const goroutineSlack = 12

// jetStream connects to the NATS server at url, closed at cleanup.
func jetStream(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// coordinatorConsumers are the names of the questions' coordinator
// consumers on the task stream.
func coordinatorConsumers(t *testing.T, js jetstream.JetStream) map[string]bool {
	t.Helper()
	return natstest.Consumers(t, js, coordinator.ConsumerName(""))
}

// persistentKeys are the keys without an expiry.
func persistentKeys(t *testing.T, c *redis.Client) map[string]bool {
	t.Helper()
	ctx := context.Background()
	keys := map[string]bool{}
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		if ttl, err := c.PTTL(ctx, iter.Val()).Result(); err == nil && ttl == -1 {
			keys[iter.Val()] = true
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// metricsReader reads a process's Prometheus text exposition.
type metricsReader struct {
	t   *testing.T
	url string
}

// value is the sum of metric name's samples (every label set).
func (m *metricsReader) value(name string) int {
	m.t.Helper()
	resp, err := http.Get(m.url)
	if err != nil {
		m.t.Fatalf("GET %s: %v", m.url, err)
	}
	defer resp.Body.Close()
	sum, found := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			m.t.Fatalf("%s: %q: %v", m.url, line, err)
		}
		sum, found = sum+v, true
	}
	if !found {
		m.t.Fatalf("%s has no %s", m.url, name)
	}
	return int(sum)
}
