// Package redact hides the secrets in URLs and DSNs before they reach a
// log, an error, run.json, Redis or a report: one function, so every
// place that shows an address hides the same things.
package redact

import (
	"regexp"
	"strings"
)

// secretParams are query parameters that carry credentials.
var secretParams = regexp.MustCompile(`(?i)([?&;](?:[a-z0-9_.-]*(?:token|key|secret|password|passwd|pwd|sig|signature|credential|auth)[a-z0-9_.-]*))=[^&;#]*`)

// URL returns s with every password, user and credential-bearing query
// parameter replaced by ***. It accepts comma-separated server lists
// (nats://a:b@h1,nats://c:d@h2), Redis Sentinel URLs with a host list
// (redis+sentinel://u:p@s1:26379,s2:26379/mymaster), passwords holding '@', ':' or '/', and text
// that does not parse as a URL (which is shown only up to its host).
func URL(s string) string {
	if s == "" {
		return ""
	}
	if scheme, _, ok := strings.Cut(s, "://"); ok && strings.HasSuffix(scheme, "+sentinel") {
		// One URL naming several sentinels (redis+sentinel://u:p@s1,s2/m):
		// its commas separate hosts, and the password may hold one too.
		return one(strings.TrimSpace(s))
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = one(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

func one(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		// A DSN without a scheme (user:pass@host/db): hide what precedes
		// the last '@'.
		scheme, rest = "", s
	}
	// The authority ends at the first '/', '?' or '#' after the last '@'
	// that precedes them: a password may itself hold '@' or '/'.
	at := lastAtBeforePath(rest)
	if at >= 0 {
		rest = "***@" + rest[at+1:]
	}
	rest = secretParams.ReplaceAllString(rest, "$1=***")
	if scheme == "" {
		return rest
	}
	return scheme + "://" + rest
}

// lastAtBeforePath finds the '@' that ends the userinfo: the last one
// before the path, query or fragment that follows the host.
func lastAtBeforePath(s string) int {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return -1
	}
	// If a '/', '?' or '#' comes after the last '@', the '@' still
	// belongs to the authority only when no such character sits between
	// it and the start; otherwise the '@' is in the path (e.g. a query
	// value) and the authority has no userinfo of its own.
	end := strings.IndexAny(s, "/?#")
	if end >= 0 && end < at {
		// The first '/' comes before the last '@': either the password
		// holds '/', or the '@' is in the path. Take the last '@' before
		// the host's own path: the '@' followed by a host-like text with
		// no '@' after it.
		host := s[at+1:]
		if i := strings.IndexAny(host, "/?#"); i >= 0 {
			host = host[:i]
		}
		if host == "" || strings.ContainsAny(host, " ") {
			return -1
		}
	}
	return at
}
