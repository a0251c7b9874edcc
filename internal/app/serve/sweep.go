package serve

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/service"
)

// What a question's run holds outside Redis — its coordinator's durable
// consumer on the stream (with its state and goroutines in every NATS
// server holding the stream, and which comes back with them after a
// restart) and its files under the state directory — is released by its
// driver once the question is over (cleanUp). A driver that died before
// (its process killed, or cut off while another process recorded the
// cancel) leaves them behind: the settle loop releases a cancelled
// question's once no driver holds its lease, and at start a sweep
// releases those of every question that is over or unknown.

// sweepBatch is how many questions one round trip of the sweep reads.
const sweepBatch = 256

// sweeper is the start sweep as a component (Start): it runs once, in its
// own goroutine, beside the drivers (it never touches a question they may
// run), and Stop waits for it.
func (s *Server) sweeper() service.Service { return &s.sweep }

// sweepOnce releases what the questions that are over, or unknown, left
// outside Redis: the candidates are the registry's question runs (those
// within their retention), the cancelled questions still to settle, and
// the question folders under this process's state directory.
func (s *Server) sweepOnce(ctx context.Context) error {
	started := time.Now()
	if _, err := rdb.PruneRuns(ctx, s.cfg.Redis, time.Now()); err != nil {
		s.cfg.Log.Warn("sweep", zap.Error(err))
	}
	s.deleteLegacyVerified(ctx)
	ids, err := s.sweepCandidates(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Warn("sweep: listing the questions to look at", zap.Error(err))
		}
		return nil
	}
	over := 0
	for chunk := range slices.Chunk(ids, sweepBatch) {
		n, err := s.sweepChunk(ctx, chunk)
		over += n
		if err != nil {
			if ctx.Err() == nil {
				s.cfg.Log.Warn("sweep", zap.Error(err))
			}
			return nil
		}
	}
	// over counts the questions released, most of which had nothing
	// left: only NATS knows, and asking costs what deleting does.
	s.cfg.Log.Info("swept what questions that are over left behind", zap.Int("questions", len(ids)), zap.Int("over", over),
		zap.Duration("took", time.Since(started)))
	return nil
}

// deleteLegacyVerified deletes the verified pairs an older serve kept
// shared by every tenant, in every mode: the shared pool of
// SharedVerifiedExamples has keys of its own (rdb.VerifiedKey), and the
// old ones hold tenants' texts and SQL that passed no guard, forever.
func (s *Server) deleteLegacyVerified(ctx context.Context) {
	known := make([]string, len(s.dbs))
	for i, db := range s.dbs {
		known[i] = rdb.LegacyVerifiedKey(db.Name, db.Dialect)
	}
	n, scanned, err := rdb.DeleteLegacyVerified(ctx, s.cfg.Redis, known)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Warn("sweep: deleting the legacy shared verified pairs", zap.Error(err))
		}
		return
	}
	if n > 0 {
		s.cfg.Log.Info("deleted the verified pairs an older serve shared across tenants", zap.Int64("keys", n))
	}
	if !scanned {
		// Redis's ACL refuses SCAN (the deployed one does): those of
		// databases no longer served stay, read by nobody.
		s.cfg.Log.Debug("sweep: SCAN refused; legacy verified pairs deleted for the served databases only")
	}
}

// sweepCandidates lists, once each, the questions that may have left
// something behind.
func (s *Server) sweepCandidates(ctx context.Context) ([]string, error) {
	runs, err := rdb.RegisteredRuns(ctx, s.cfg.Redis)
	if err != nil {
		return nil, err
	}
	settling, err := s.cfg.Redis.ZRange(ctx, settleKey, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("listing the questions to settle: %w", err)
	}
	local, err := s.questionDirs()
	if err != nil {
		return nil, err
	}
	// A consumer whose question's keys have all expired (left by a serve
	// from before consumers were released) is known only to NATS.
	prefix := coordinator.ConsumerName("")
	consumers, err := s.cfg.Env.Queue.ConsumerNames(ctx, prefix)
	if err != nil {
		return nil, err
	}
	for i, c := range consumers {
		consumers[i] = strings.TrimPrefix(c, prefix)
	}
	seen := map[string]bool{}
	var ids []string
	for _, id := range slices.Concat(runs, settling, local, consumers) {
		if isQuestionID(id) && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// questionDirs lists the question folders under the state directory.
func (s *Server) questionDirs() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.cfg.StateDir, "questions"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the question runs' folders: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// sweepChunk releases what each question of ids that is over left behind
// and returns how many it released.
func (s *Server) sweepChunk(ctx context.Context, ids []string) (int, error) {
	states, err := rdb.QuestionStates(ctx, s.cfg.Redis, ids)
	if err != nil {
		return 0, err
	}
	var over []string
	retired := map[string]bool{}
	for i, id := range ids {
		st := states[i]
		if st.Pending || st.Driven {
			continue // a driver runs it, or will resume it
		}
		if !st.Recorded && !s.questionRun(ctx, id) {
			continue // a batch run named like a question
		}
		over = append(over, id)
		retired[id] = st.Retired
	}
	s.releaseAll(ctx, over, retired)
	return len(over), ctx.Err()
}

// sweepConcurrency is how many questions the sweep releases at once: each
// release is a round trip to NATS, and a registry holds every question of
// the retention (a few thousand a second this way on one machine).
const sweepConcurrency = 8

// releaseAll releases what each question of ids left behind, retiring the
// runs not yet retired, sweepConcurrency at a time; it returns once all are
// done.
func (s *Server) releaseAll(ctx context.Context, ids []string, retired map[string]bool) {
	slots := make(chan struct{}, sweepConcurrency)
	var wg sync.WaitGroup
	for _, id := range ids {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			if !retired[id] {
				s.retireRun(ctx, id)
			}
			s.release(ctx, id, s.questionDir(id))
		}()
	}
	wg.Wait()
}

// questionRun reports whether run id, which no question record names, is
// (or was) a question's: its manifest says it is interactive, or it has
// none left (its keys expired).
func (s *Server) questionRun(ctx context.Context, id string) bool {
	m, err := s.cfg.Env.State.Manifest(ctx, id)
	if errors.Is(err, runstate.ErrNoRun) {
		return true
	}
	return err == nil && m.Interactive
}

// releaseOrphan releases what cancelled question id still holds outside
// Redis once no driver holds its lease (a driver still running it
// releases them as it stops).
func (s *Server) releaseOrphan(ctx context.Context, id string) {
	n, err := s.cfg.Redis.Exists(ctx, rdb.QuestionLeaseKey(id)).Result()
	if err != nil || n > 0 {
		return
	}
	s.release(ctx, id, s.questionDir(id))
}

// isQuestionID reports whether id has the shape of a question id (ids.go):
// "q" and the hex digits of its random part and tag.
func isQuestionID(id string) bool {
	if len(id) != 1+2*(idNonce+idTag) || id[0] != 'q' {
		return false
	}
	_, err := hex.DecodeString(id[1:])
	return err == nil
}
