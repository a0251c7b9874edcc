package check

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/redisconn"
	"github.com/quorumsql/quorum/internal/testutil/wait"
)

// The replica and sentinel users' password (start.sh's
// QUORUM_REDIS_ADMIN_PASSWORD), which the roles never hold.
const adminPassword = "5e6f7a8b9c0d1e2f3a4b5c6d7e8f90a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7"

// sentinelRig is deploy/redis's failover set-up on loopback, each server
// started by the scripts the compose file and the k8s component run: a
// primary and a replica by start.sh, three sentinels by sentinel.sh.
type sentinelRig struct {
	ports     [2]int // the two servers'
	servers   [2]*scriptRedis
	sentinels []*scriptRedis
}

func (r *sentinelRig) self(i int) string { return "127.0.0.1:" + strconv.Itoa(r.ports[i]) }

// sentinelList is QUORUM_REDIS_SENTINELS and the URL's host list.
func (r *sentinelRig) sentinelList(ports []int) string {
	var s []string
	for _, p := range ports {
		s = append(s, "127.0.0.1:"+strconv.Itoa(p))
	}
	return strings.Join(s, ",")
}

// startServer runs start.sh for server i as the compose file does: it asks
// the sentinels for the primary and falls back to server 0.
func (r *sentinelRig) startServer(t *testing.T, i int, sentinels string) {
	t.Helper()
	env := []string{"QUORUM_REDIS_PASSWORD=" + redisPassword, "QUORUM_REDIS_ADMIN_PASSWORD=" + adminPassword,
		"QUORUM_REDIS_SELF=" + r.self(i), "QUORUM_REDIS_SENTINELS=" + sentinels,
		"QUORUM_REDIS_REPLICAOF=127.0.0.1 " + strconv.Itoa(r.ports[0])}
	s, err := runScript(t, "../redis/start.sh", r.ports[i], env,
		"--port", strconv.Itoa(r.ports[i]), "--bind", "127.0.0.1", "--save", "", "--dir", t.TempDir())
	if err != nil {
		t.Fatalf("start.sh (server %d): %v", i, err)
	}
	r.servers[i] = s
}

// sentinelMaster is what a sentinel knows of the primary it watches.
func sentinelMaster(ctx context.Context, addr string) (map[string]string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr, Password: redisPassword, MaxRetries: -1})
	defer sc.Close()
	return sc.Master(ctx, "quorum").Result()
}

// TestSentinelFailover: deploy/redis's scripts make a set-up that fails
// over. The replica follows the primary as the replica user, three
// sentinels (which require the roles' password) agree on it, the roles'
// redis+sentinel URL reaches it; when the primary is SIGKILLed the
// sentinels promote the replica and the same client writes on; the old
// primary, restarted by start.sh, asks the sentinels and comes back as a
// replica of the new one instead of a second primary.
func TestSentinelFailover(t *testing.T) {
	ctx := context.Background()
	r := &sentinelRig{ports: [2]int{freePort(t), freePort(t)}}
	sPorts := []int{freePort(t), freePort(t), freePort(t)}
	list := r.sentinelList(sPorts)
	// No sentinel runs yet: both fall back to QUORUM_REDIS_REPLICAOF.
	r.startServer(t, 0, list)
	r.startServer(t, 1, list)
	dir := t.TempDir()
	for i, p := range sPorts {
		env := []string{"QUORUM_REDIS_PASSWORD=" + redisPassword, "QUORUM_REDIS_ADMIN_PASSWORD=" + adminPassword,
			"QUORUM_REDIS_PRIMARY=127.0.0.1 " + strconv.Itoa(r.ports[0]), "QUORUM_SENTINEL_ANNOUNCE=127.0.0.1",
			"QUORUM_SENTINEL_CONF=" + filepath.Join(dir, fmt.Sprintf("sentinel%d.conf", i)), "QUORUM_SENTINEL_DOWN_AFTER_MS=1000"}
		s, err := runScript(t, "../redis/sentinel.sh", p, env, "--port", strconv.Itoa(p), "--bind", "127.0.0.1")
		if err != nil {
			t.Fatalf("sentinel.sh: %v", err)
		}
		r.sentinels = append(r.sentinels, s)
	}
	// The sentinel's file holds passwords: its own alone.
	if fi, err := os.Stat(filepath.Join(dir, "sentinel0.conf")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("sentinel0.conf: %v, mode %v, want 0600", err, fi.Mode().Perm())
	}
	for _, s := range r.sentinels {
		wait.For(t, time.Minute, "sentinel "+s.addr+" to know the replica and the other two sentinels", func() bool {
			m, err := sentinelMaster(ctx, s.addr)
			return err == nil && m["num-slaves"] == "1" && m["num-other-sentinels"] == "2" && !strings.Contains(m["flags"], "down")
		})
	}
	// A sentinel refuses a client without the password.
	anon := redis.NewSentinelClient(&redis.Options{Addr: r.sentinels[0].addr, MaxRetries: -1})
	if _, err := anon.GetMasterAddrByName(ctx, "quorum").Result(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("a sentinel answered a client without the password: %v", err)
	}
	anon.Close()

	o, err := redisconn.Parse("redis+sentinel://quorum:" + redisPassword + "@" + list + "/quorum/0?sentinel_password=" + redisPassword)
	if err != nil {
		t.Fatal(err)
	}
	c := o.Client()
	t.Cleanup(func() { c.Close() })
	if err := c.Set(ctx, "quorum:before", "1", 0).Err(); err != nil {
		t.Fatalf("SET through the sentinels: %v", err)
	}
	replica := r.servers[1].client(t, "quorum", redisPassword)
	wait.For(t, time.Minute, "the replica to hold what was written on the primary", func() bool {
		v, err := replica.Get(ctx, "quorum:before").Result()
		return err == nil && v == "1"
	})

	r.servers[0].stop(syscall.SIGKILL)
	wait.For(t, 2*time.Minute, "every sentinel to name the replica the primary", func() bool {
		for _, s := range r.sentinels {
			m, err := sentinelMaster(ctx, s.addr)
			if err != nil || net.JoinHostPort(m["ip"], m["port"]) != r.self(1) {
				return false
			}
		}
		return true
	})
	wait.For(t, time.Minute, "the roles' client to write on the promoted replica", func() bool {
		return c.Set(ctx, "quorum:after", "2", 0).Err() == nil
	})
	if v, err := c.Get(ctx, "quorum:before").Result(); err != nil || v != "1" {
		t.Errorf("after the failover quorum:before = %q (%v), want 1", v, err)
	}

	// The old primary comes back: start.sh asks the sentinels and follows
	// the new primary, with the replica user's password.
	r.startServer(t, 0, list)
	old := r.servers[0].client(t, "quorum", redisPassword)
	wait.For(t, time.Minute, "the restarted old primary to replicate from the new one", func() bool {
		v, err := old.Get(ctx, "quorum:after").Result()
		return err == nil && v == "2"
	})
	if err := old.Set(ctx, "quorum:stray", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "READONLY") {
		t.Errorf("the restarted old primary accepted a write (%v): it came back as a second primary", err)
	}
	if !strings.Contains(r.servers[0].out.String(), "starting as a replica of 127.0.0.1 "+strconv.Itoa(r.ports[1])) {
		t.Errorf("start.sh did not follow the sentinels' primary; its output:\n%s", r.servers[0].out.String())
	}
}
