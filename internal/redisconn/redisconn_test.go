package redisconn

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/wait"
)

func TestParseSentinelURL(t *testing.T) {
	for _, tc := range []struct {
		url                  string
		master               string
		addrs                []string
		user, pass           string
		sentUser, sentPass   string
		db                   int
		tls                  bool
		dialTimeout, poolCap int
	}{
		{url: "redis+sentinel://h1:26379,h2:26379,h3:26379/mymaster", master: "mymaster", addrs: []string{"h1:26379", "h2:26379", "h3:26379"}},
		{url: "redis+sentinel://quorum:s3cret@h1,h2:26380/main/2", master: "main", addrs: []string{"h1:26379", "h2:26380"}, user: "quorum", pass: "s3cret", db: 2},
		{url: "redis+sentinel://:p%40ss@h1:1/m", master: "m", addrs: []string{"h1:1"}, pass: "p@ss"},
		// A password holding '@', '/' and ',' as typed.
		{url: "redis+sentinel://u:a@b/c,d@h1:1,h2:2/m/1", master: "m", addrs: []string{"h1:1", "h2:2"}, user: "u", pass: "a@b/c,d", db: 1},
		{url: "rediss+sentinel://u:p@h1:1/m?sentinel_password=sp&sentinel_username=su&dial_timeout=3&pool_size=7", master: "m", addrs: []string{"h1:1"},
			user: "u", pass: "p", sentUser: "su", sentPass: "sp", tls: true, dialTimeout: 3, poolCap: 7},
	} {
		o, err := Parse(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		if o.Sentinel == nil {
			t.Fatalf("%s: no Sentinel", tc.url)
		}
		s := o.Sentinel
		if s.Master != tc.master || !reflect.DeepEqual(s.Addrs, tc.addrs) || s.Username != tc.sentUser || s.Password != tc.sentPass {
			t.Errorf("%s: sentinel %+v, want master %q addrs %v sentinel user %q password %q", tc.url, *s, tc.master, tc.addrs, tc.sentUser, tc.sentPass)
		}
		if o.Username != tc.user || o.Password != tc.pass || o.DB != tc.db || (o.TLSConfig != nil) != tc.tls || o.Addr != "" {
			t.Errorf("%s: user %q password %q db %d TLS %v addr %q, want %q %q %d %v and no addr", tc.url, o.Username, o.Password, o.DB, o.TLSConfig != nil, o.Addr, tc.user, tc.pass, tc.db, tc.tls)
		}
		if tc.dialTimeout != 0 && (o.DialTimeout != time.Duration(tc.dialTimeout)*time.Second || o.PoolSize != tc.poolCap) {
			t.Errorf("%s: dial timeout %v pool %d, want %ds and %d", tc.url, o.DialTimeout, o.PoolSize, tc.dialTimeout, tc.poolCap)
		}
		if !o.ContextTimeoutEnabled {
			t.Errorf("%s: context timeouts off", tc.url)
		}
	}
	// A single server's URL stays a single server's.
	o, err := Parse("redis://u:p@127.0.0.1:6380/3")
	if err != nil || o.Sentinel != nil || o.Addr != "127.0.0.1:6380" || o.DB != 3 || !o.ContextTimeoutEnabled {
		t.Fatalf("redis:// URL: %+v %v", o, err)
	}
}

// TestParseErrorsHidePassword: a bad URL is refused with a reason and
// without its password.
func TestParseErrorsHidePassword(t *testing.T) {
	for _, u := range []string{
		"redis+sentinel://u:topsecret@h1:26379,h2:26379",
		"redis+sentinel://u:topsecret@/mymaster",
		"redis+sentinel://u:topsecret@h1/m/notadb",
		"redis+sentinel://u:topsecret@h1/m?bogus_option=1",
		"redis+sentinel://u:topsecret@h1/",
		"redis://u:topsecret@h1:notaport",
	} {
		_, err := Parse(u)
		if err == nil {
			t.Errorf("%s: accepted", u)
			continue
		}
		if strings.Contains(err.Error(), "topsecret") {
			t.Errorf("%s: the error shows the password: %v", u, err)
		}
	}
}

// TestFailoverClientFollowsThePrimary: a client of a redis+sentinel URL
// writes to the primary; once the primary is SIGKILLed and the sentinels
// promote the replica, the same client writes and runs Lua on the new
// one, and what it wrote before the failover (replicated) is there.
func TestFailoverClientFollowsThePrimary(t *testing.T) {
	s := redistest.StartSentinel(t)
	o, err := Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	c := o.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatalf("SET before the failover: %v", err)
	}
	old, err := s.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the replica to have the write, as a primary's kill
	// otherwise loses it (asynchronous replication).
	if n, err := c.Do(ctx, "WAIT", 1, 10000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d %v", n, err)
	}
	s.Node(old).Kill()
	now := s.WaitFailover(t, old, 60*time.Second)
	var lastErr error
	wait.For(t, 30*time.Second, "the client to write to the new primary "+now, func() bool {
		lastErr = c.Set(ctx, "after", "2", 0).Err()
		return lastErr == nil
	})
	if v, err := c.Get(ctx, "before").Result(); err != nil || v != "1" {
		t.Fatalf("GET before after the failover: %q %v, want 1", v, err)
	}
	n, err := c.Eval(ctx, "return redis.call('INCRBY', KEYS[1], ARGV[1])", []string{"lua"}, 5).Int()
	if err != nil || n != 5 {
		t.Fatalf("EVAL on the new primary: %d %v, want 5", n, err)
	}
}
