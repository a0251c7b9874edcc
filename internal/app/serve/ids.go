package serve

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/rdb"
)

// idKeyName holds the secret question ids are signed with, shared by
// every serve process of a Redis (any process answers for any question).
const idKeyName = rdb.IDKey

// idNonce and idTag are the lengths, in bytes, of an id's random part and
// of its tag: "q" + 20 + 16 hex digits.
const (
	idNonce = 10
	idTag   = 8
)

// ids mints question ids bound to their tenant and checks them. The tag
// is an HMAC of the tenant and the random part, so whether an id is this
// tenant's is decided without reading Redis: a lookup of another
// tenant's question and of a question that does not exist take the same
// path (no Redis command) and the same time.
type ids struct {
	rdb redis.UniversalClient
	mu  sync.Mutex
	key []byte
}

// secret returns the signing key, creating it in Redis on first use.
func (x *ids) secret(ctx context.Context) ([]byte, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.key != nil {
		return x.key, nil
	}
	fresh := make([]byte, 32)
	_, _ = rand.Read(fresh)
	if err := x.rdb.SetNX(ctx, idKeyName, hex.EncodeToString(fresh), 0).Err(); err != nil {
		return nil, fmt.Errorf("question id key %s: %w", idKeyName, err)
	}
	s, err := x.rdb.Get(ctx, idKeyName).Result()
	if err != nil {
		return nil, fmt.Errorf("question id key %s: %w", idKeyName, err)
	}
	key, err := hex.DecodeString(s)
	if err != nil || len(key) < 16 {
		return nil, fmt.Errorf("question id key %s: not a hex key of 16 bytes or more", idKeyName)
	}
	x.key = key
	return key, nil
}

func tag(key []byte, tenant string, nonce []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(tenant))
	m.Write([]byte{0})
	m.Write(nonce)
	return m.Sum(nil)[:idTag]
}

// mint returns a new id of tenant's.
func (x *ids) mint(ctx context.Context, tenant string) (string, error) {
	key, err := x.secret(ctx)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, idNonce)
	_, _ = rand.Read(nonce)
	return "q" + hex.EncodeToString(nonce) + hex.EncodeToString(tag(key, tenant, nonce)), nil
}

var errNotOwned = errors.New("not an id of this tenant")

// check returns nil when id was minted for tenant. Every well-formed id
// costs one HMAC and one constant-time comparison, whoever owns it.
func (x *ids) check(ctx context.Context, tenant, id string) error {
	key, err := x.secret(ctx)
	if err != nil {
		return err
	}
	raw := make([]byte, idNonce+idTag)
	ok := len(id) == 1+2*len(raw) && id[0] == 'q'
	if ok {
		_, derr := hex.Decode(raw, []byte(id[1:]))
		ok = derr == nil
	}
	// The HMAC is computed for malformed ids too: the same work either way.
	want := tag(key, tenant, raw[:idNonce])
	if subtle.ConstantTimeCompare(want, raw[idNonce:]) != 1 || !ok {
		return errNotOwned
	}
	return nil
}
