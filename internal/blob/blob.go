// Package blob stores large payloads (schema prompts, exploration
// transcripts, result tables) in Redis by content hash, so messages carry a
// reference instead of the bytes and equal payloads are stored once.
package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// Store is a content-addressed store in Redis.
type Store struct {
	rdb redis.UniversalClient
	ttl time.Duration
}

// New returns a store; ttl 0 keeps blobs rdb.BlobTTL (14 days).
func New(c redis.UniversalClient, ttl time.Duration) *Store {
	if ttl <= 0 {
		ttl = rdb.BlobTTL
	}
	return &Store{rdb: c, ttl: ttl}
}

// Ref is the reference of data: "sha256:<hex>".
func Ref(data []byte) string {
	h := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(h[:])
}

// CheckRef refuses anything but "sha256:" and 64 lowercase hex digits:
// references arrive in messages and become Redis keys.
func CheckRef(ref string) error {
	h, ok := strings.CutPrefix(ref, "sha256:")
	if !ok || len(h) != 2*sha256.Size || strings.Trim(h, "0123456789abcdef") != "" {
		return fmt.Errorf("blob reference %.80q is not sha256:<64 hex digits>", ref)
	}
	return nil
}

// Put stores data and returns its reference.
func (s *Store) Put(ctx context.Context, data []byte) (string, error) {
	ref := Ref(data)
	if err := s.rdb.SetArgs(ctx, rdb.BlobKey(ref), data, redis.SetArgs{TTL: s.ttl}).Err(); err != nil {
		return "", fmt.Errorf("store blob %s: %w", ref, err)
	}
	return ref, nil
}

// PutMany stores several texts in one round trip and returns their
// references, in order.
func (s *Store) PutMany(ctx context.Context, texts []string) ([]string, error) {
	refs := make([]string, len(texts))
	if len(texts) == 0 {
		return refs, nil
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range texts {
			refs[i] = Ref([]byte(t))
			p.SetArgs(ctx, rdb.BlobKey(refs[i]), t, redis.SetArgs{TTL: s.ttl})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store %d blobs: %w", len(texts), err)
	}
	return refs, nil
}

// GetMany returns the texts of refs in one round trip, checked against
// their hashes; a reference the store does not hold is ErrNotFound.
func (s *Store) GetMany(ctx context.Context, refs []string) ([]string, error) {
	out := make([]string, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	keys := make([]string, len(refs))
	for i, r := range refs {
		if err := CheckRef(r); err != nil {
			return nil, err
		}
		keys[i] = rdb.BlobKey(r)
	}
	// Pipelined GETs rather than MGET: the keys may live on different
	// shards.
	cmds := make([]*redis.StringCmd, len(keys))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.Get(ctx, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read %d blobs: %w", len(refs), err)
	}
	for i, c := range cmds {
		str, err := c.Result()
		if errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, refs[i])
		}
		if err != nil {
			return nil, fmt.Errorf("read blob %s: %w", refs[i], err)
		}
		if Ref([]byte(str)) != refs[i] {
			return nil, fmt.Errorf("blob %s is corrupt (hash mismatch)", refs[i])
		}
		out[i] = str
	}
	return out, nil
}

// RefOf is the reference of text: Ref of its bytes.
func (s *Store) RefOf(text string) string { return Ref([]byte(text)) }

// PutString stores a string.
func (s *Store) PutString(ctx context.Context, text string) (string, error) {
	return s.Put(ctx, []byte(text))
}

// ErrNotFound is returned for a reference the store does not hold (expired,
// or lost with a Redis restarted from an older snapshot). It matches
// agent.ErrBlobLost too (errors.Is), the error the public packages know.
var ErrNotFound error = notFound{}

type notFound struct{}

func (notFound) Error() string        { return "blob not found" }
func (notFound) Is(target error) bool { return target == agent.ErrBlobLost }

// Get returns the data of ref and checks it against the hash.
func (s *Store) Get(ctx context.Context, ref string) ([]byte, error) {
	if err := CheckRef(ref); err != nil {
		return nil, err
	}
	b, err := s.rdb.Get(ctx, rdb.BlobKey(ref)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, ref)
	}
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", ref, err)
	}
	if Ref(b) != ref {
		return nil, fmt.Errorf("blob %s is corrupt (hash mismatch)", ref)
	}
	return b, nil
}

// GetString returns the text of ref ("" for an empty ref).
func (s *Store) GetString(ctx context.Context, ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	b, err := s.Get(ctx, ref)
	return string(b), err
}
