// Package redisconn is the one place a Redis client is built from a URL:
// a single server (redis://, rediss://, unix://) or a primary that Redis
// Sentinel watches and fails over (redis+sentinel://, rediss+sentinel://).
// Every role, quorum run, serve and the runs commands connect through it,
// so every --redis-url accepts the same forms.
//
// Redis Cluster is not supported: quorum's Lua scripts touch several keys
// of a run at once, which a cluster would spread over hash slots.
package redisconn

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// DefaultSentinelPort is the port of a sentinel address given without one.
const DefaultSentinelPort = "26379"

// Options are a parsed Redis URL. The embedded redis.Options hold what
// the data connections use (the ACL user, the database, TLS, the pool);
// for a Sentinel URL their Addr is empty and Sentinel says where the
// sentinels are and which primary they watch.
type Options struct {
	*redis.Options
	Sentinel *Sentinel
}

// Sentinel locates the primary through Redis Sentinel.
type Sentinel struct {
	// Master is the name the sentinels monitor the primary under.
	Master string
	// Addrs are the sentinels' host:port addresses.
	Addrs []string
	// Username and Password authenticate to the sentinels when they
	// require it (sentinel_username / sentinel_password in the URL).
	Username, Password string
}

// Parse parses a Redis URL. Besides go-redis's redis://, rediss:// and
// unix:// forms it accepts
//
//	redis+sentinel://[user:pass@]host1:26379,host2:26379,host3:26379/master[/db][?options]
//
// (rediss+sentinel:// for TLS), where user:pass is the ACL user of the
// primary and its replicas, master the name the sentinels monitor it
// under, and the options go-redis's URL options plus sentinel_username and
// sentinel_password for sentinels that require a password. Context
// timeouts are on: a caller's deadline bounds every command. Errors say
// what is wrong without quoting the URL (its password): the caller names
// the URL with redact.URL.
func Parse(rawURL string) (*Options, error) {
	scheme, rest, _ := strings.Cut(rawURL, "://")
	var (
		o   *Options
		err error
	)
	switch scheme {
	case "redis+sentinel", "rediss+sentinel":
		o, err = parseSentinel(strings.TrimSuffix(scheme, "+sentinel"), rest)
	default:
		var opt *redis.Options
		opt, err = redis.ParseURL(rawURL)
		o = &Options{Options: opt}
	}
	if err != nil {
		// url.Parse quotes the whole URL, password included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, err
	}
	o.ContextTimeoutEnabled = true
	return o, nil
}

// parseSentinel reads rest, the part of a redis+sentinel URL after its
// scheme. The sentinel list does not fit url.Parse (a host holds no
// comma), so the authority is split by hand: the userinfo ends at the last
// '@' before the path, and a password may hold '@', ':' or ','.
func parseSentinel(scheme, rest string) (*Options, error) {
	rest, query, _ := strings.Cut(rest, "?")
	slash := strings.Index(rest[strings.LastIndex(rest, "@")+1:], "/")
	if slash < 0 {
		return nil, errors.New("no primary name: redis+sentinel://host1:26379,host2:26379,host3:26379/mymaster")
	}
	slash += strings.LastIndex(rest, "@") + 1
	authority, path := rest[:slash], strings.Trim(rest[slash:], "/")
	userinfo, hosts := "", authority
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		userinfo, hosts = authority[:at], authority[at+1:]
	}
	s := &Sentinel{}
	for _, h := range strings.Split(hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if !strings.Contains(h, ":") || strings.HasSuffix(h, "]") {
			h += ":" + DefaultSentinelPort
		}
		s.Addrs = append(s.Addrs, h)
	}
	if len(s.Addrs) == 0 {
		return nil, errors.New("no sentinel address: redis+sentinel://host1:26379,host2:26379,host3:26379/mymaster")
	}
	master, db, _ := strings.Cut(path, "/")
	if master == "" {
		return nil, errors.New("no primary name: redis+sentinel://host1:26379,host2:26379,host3:26379/mymaster")
	}
	if s.Master, _ = url.PathUnescape(master); s.Master == "" {
		s.Master = master
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, err
	}
	s.Username, s.Password = q.Get("sentinel_username"), q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	// The data connections' options are go-redis's URL options: parse
	// them as a single server's URL on the first sentinel's address, so an
	// unknown option is refused the same way, then drop that address.
	single := scheme + "://"
	if userinfo != "" {
		// Re-escaped: a password may hold '@' or '/' as given.
		user, pass, hasPass := strings.Cut(userinfo, ":")
		if u, err := url.PathUnescape(user); err == nil {
			user = u
		}
		if p, err := url.PathUnescape(pass); err == nil {
			pass = p
		}
		ui := url.User(user)
		if hasPass {
			ui = url.UserPassword(user, pass)
		}
		single += ui.String() + "@"
	}
	single += s.Addrs[0]
	if db != "" {
		single += "/" + db
	}
	if len(q) > 0 {
		single += "?" + q.Encode()
	}
	opt, err := redis.ParseURL(single)
	if err != nil {
		return nil, err
	}
	opt.Addr = ""
	if opt.TLSConfig != nil {
		// The primary's host is learnt from the sentinels; the TLS
		// dialer names the host it dials.
		opt.TLSConfig.ServerName = ""
	}
	return &Options{Options: opt, Sentinel: s}, nil
}

// Where says where the client connects, for messages: host:port, or the
// primary's name and its sentinels.
func (o *Options) Where() string {
	if o.Sentinel == nil {
		return o.Addr
	}
	return fmt.Sprintf("primary %q of sentinels %s", o.Sentinel.Master, strings.Join(o.Sentinel.Addrs, ","))
}

// Client opens a client with o: a plain one, or for a Sentinel URL a
// failover client that asks the sentinels for the primary and, when they
// promote a replica, drops its connections to the old primary and
// reconnects to the new one.
func (o *Options) Client() *redis.Client {
	if o.Sentinel == nil {
		return redis.NewClient(o.Options)
	}
	p := o.Options
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:       o.Sentinel.Master,
		SentinelAddrs:    o.Sentinel.Addrs,
		SentinelUsername: o.Sentinel.Username,
		SentinelPassword: o.Sentinel.Password,
		ClientName:       p.ClientName,
		Protocol:         p.Protocol,
		Username:         p.Username,
		Password:         p.Password,
		DB:               p.DB,
		MaxRetries:       p.MaxRetries,
		MinRetryBackoff:  p.MinRetryBackoff,
		MaxRetryBackoff:  p.MaxRetryBackoff,
		DialTimeout:      p.DialTimeout,
		DialerRetries:    p.DialerRetries,
		ReadTimeout:      p.ReadTimeout,
		WriteTimeout:     p.WriteTimeout,
		// Always on (Parse sets it): a caller's deadline bounds every
		// command, during a failover too.
		ContextTimeoutEnabled: p.ContextTimeoutEnabled,
		PoolFIFO:              p.PoolFIFO,
		PoolSize:              p.PoolSize,
		PoolTimeout:           p.PoolTimeout,
		MinIdleConns:          p.MinIdleConns,
		MaxIdleConns:          p.MaxIdleConns,
		MaxActiveConns:        p.MaxActiveConns,
		ConnMaxIdleTime:       p.ConnMaxIdleTime,
		ConnMaxLifetime:       p.ConnMaxLifetime,
		TLSConfig:             p.TLSConfig,
		DisableIdentity:       p.DisableIdentity,
		IdentitySuffix:        p.IdentitySuffix,
	})
}
