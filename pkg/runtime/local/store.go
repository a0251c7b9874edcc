package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"

	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// Store is agent.Store in memory: what one example's tasks and decisions
// share in process (Solve gives each example its own). Agent tests use it
// to hand a task or a decision the store the runtime would.
type Store struct {
	mu    sync.Mutex
	vals  map[string]string
	once  map[string]*sync.Mutex
	blobs map[string][]byte
	parts map[string]map[int]agent.Part
	// checkpoints by name, and how many saves were made.
	checkpoints map[string][]byte
	saves       int
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{vals: map[string]string{}, once: map[string]*sync.Mutex{}, blobs: map[string][]byte{}, parts: map[string]map[int]agent.Part{}, checkpoints: map[string][]byte{}}
}

func (s *Store) Once(ctx context.Context, name string, fn func(context.Context) (string, error)) (string, error) {
	s.mu.Lock()
	l, ok := s.once[name]
	if !ok {
		l = &sync.Mutex{}
		s.once[name] = l
	}
	s.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	if v, ok, _ := s.Get(ctx, "once:"+name); ok {
		return v, nil
	}
	v, err := fn(ctx)
	if err != nil {
		return "", err
	}
	return v, s.Set(ctx, "once:"+name, v)
}

func (s *Store) Get(_ context.Context, name string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vals[name]
	return v, ok, nil
}

func (s *Store) Set(_ context.Context, name, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals[name] = value
	return nil
}

func (s *Store) PutBlob(_ context.Context, b []byte) (string, error) {
	sum := sha256.Sum256(b)
	ref := "sha256:" + hex.EncodeToString(sum[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blobs[ref] = append([]byte(nil), b...)
	return ref, nil
}

func (s *Store) GetBlob(_ context.Context, ref string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blobs[ref]
	if !ok {
		return nil, fmt.Errorf("blob %s: %w", ref, agent.ErrBlobLost)
	}
	return b, nil
}

// AddPart records a part of a join, as the runtime does when the part's
// task ends (a part already recorded is kept), and returns how many parts
// the join has.
func (s *Store) AddPart(group string, p agent.Part) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts[group] == nil {
		s.parts[group] = map[int]agent.Part{}
	}
	if _, dup := s.parts[group][p.Index]; !dup {
		s.parts[group][p.Index] = p
	}
	return len(s.parts[group])
}

func (s *Store) Parts(_ context.Context, group string) ([]agent.Part, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]agent.Part, 0, len(s.parts[group]))
	for _, p := range s.parts[group] {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, nil
}

func (s *Store) Checkpoint(_ context.Context, name string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.checkpoints[name]
	return append([]byte(nil), b...), ok, nil
}

func (s *Store) SaveCheckpoint(_ context.Context, name string, state []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkpoints[name] = append([]byte(nil), state...)
	s.saves++
	return nil
}

func (s *Store) DropCheckpoint(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.checkpoints, name)
	return nil
}

// Checkpoints lists the checkpoints kept (saved and not dropped), sorted,
// and counts every save made: a test sees a chain checkpointed and
// cleaned up.
func (s *Store) Checkpoints() (names []string, saves int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n := range s.checkpoints {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, s.saves
}
