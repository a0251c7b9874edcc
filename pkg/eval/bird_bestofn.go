package eval

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// BestOfN is BIRD's execution accuracy with every candidate of an example
// given its chance, the RAISE paper's headline metric: an example counts
// when its final prediction or any of its candidates is right.
type BestOfN struct {
	Instances []BestOfNInstance `json:"instances"`
	// Correct of the Total examples with a final prediction or a
	// candidate; EXAllGold scores the others wrong, over all Gold examples.
	Correct   int     `json:"correct"`
	Total     int     `json:"total"`
	EX        float64 `json:"ex"`
	Gold      int     `json:"gold"`
	EXAllGold float64 `json:"ex_all_gold"`
	// ByDifficulty is over every gold example, as BirdReport's.
	ByDifficulty []DifficultyScore `json:"by_difficulty,omitempty"`
}

// BestOfNInstance is one example's Best-of-N verdict.
type BestOfNInstance struct {
	InstanceID string `json:"instance_id"`
	// Candidates is how many candidate files the example has (the final
	// prediction aside).
	Candidates int `json:"candidates"`
	Score      int `json:"score"`
	// CorrectBy names the first right one found: "final", or a candidate's
	// file name.
	CorrectBy string `json:"correct_by,omitempty"`
}

// birdScorer scores one example's predictions; it is used by one goroutine.
type birdScorer struct {
	cfg     BirdConfig
	gold    *BirdGold
	id      string
	task    BirdTask
	goldCSV string

	goldFrame *Frame
	goldErr   error
	goldRead  bool
}

// instance scores the final prediction at path, and returns it as read
// (nil when it could not be).
func (s *birdScorer) instance(ctx context.Context, path string) (InstanceScore, []byte, bool) {
	sc := InstanceScore{InstanceID: s.id}
	data, err := s.read(path)
	ok := false
	if err == nil {
		ok, err = s.score(ctx, data, filepath.Base(path))
	}
	switch {
	case err != nil:
		sc.Error = err.Error()
	case ok:
		sc.Score = 1
	default:
		sc.Error = "result mismatch: the predicted rows are not the gold rows (compared as sets)"
	}
	return sc, data, ok
}

// bestOfN scores the candidates until one is right; a candidate that
// cannot be read or run counts as wrong, as a prediction would. Identical
// candidates are scored once.
func (s *birdScorer) bestOfN(ctx context.Context, final []byte, finalOK bool, files []string) BestOfNInstance {
	b := BestOfNInstance{InstanceID: s.id, Candidates: len(files)}
	if finalOK {
		b.Score, b.CorrectBy = 1, "final"
		return b
	}
	seen := map[string]bool{}
	if final != nil {
		seen[s.key(final)] = true
	}
	for _, f := range files {
		if ctx.Err() != nil {
			return b
		}
		data, err := s.read(f)
		if err != nil || seen[s.key(data)] {
			continue
		}
		seen[s.key(data)] = true
		if ok, err := s.score(ctx, data, filepath.Base(f)); err == nil && ok {
			b.Score, b.CorrectBy = 1, filepath.Base(f)
			return b
		}
	}
	return b
}

// key is what makes two predictions the same: the query in sql mode, the
// table in exec_result mode.
func (s *birdScorer) key(data []byte) string {
	if s.cfg.Mode == ModeSQL {
		return strings.TrimSpace(PredictionSQL(string(data)))
	}
	return strings.TrimSpace(string(data))
}

func (s *birdScorer) read(path string) ([]byte, error) {
	lim := s.cfg.Limits.withDefaults()
	if s.cfg.Mode == ModeExecResult {
		return readBounded(path, lim.MaxBytes, ErrTooLarge)
	}
	return readBounded(path, lim.MaxBytes, errors.New("prediction file too large"))
}

// score compares one prediction (a file's contents) with the gold: rows of
// the executed SQL in sql mode, CSV tables in exec_result mode.
func (s *birdScorer) score(ctx context.Context, data []byte, name string) (bool, error) {
	if s.cfg.Mode == ModeSQL {
		return s.gold.ScoreSQL(ctx, s.id, s.task.GoldSQL, PredictionSQL(string(data)))
	}
	lim := s.cfg.Limits.withDefaults()
	pred, err := readCSVText(string(data), lim)
	if err != nil {
		return false, fmt.Errorf("prediction %s: %w", name, err)
	}
	if !s.goldRead {
		s.goldRead = true
		if s.goldFrame, s.goldErr = ReadCSVFileLimited(s.goldCSV, lim); s.goldErr != nil {
			s.goldErr = fmt.Errorf("gold %w", s.goldErr)
		}
	}
	if s.goldErr != nil {
		return false, s.goldErr
	}
	return BirdEqualFrames(pred, s.goldFrame), nil
}

// candidateFiles lists dir/<instance_id>/*ext, each example's files in
// name order; "" lists nothing.
func candidateFiles(dir, ext string) (map[string][]string, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("candidates folder (a run's output folder keeps them in candidates/<instance_id>/): %w", err)
	}
	out := map[string][]string{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("candidates of %s: %w", e.Name(), err)
		}
		for _, f := range files {
			if !f.IsDir() && strings.HasSuffix(f.Name(), ext) {
				out[e.Name()] = append(out[e.Name()], filepath.Join(dir, e.Name(), f.Name()))
			}
		}
		sort.Strings(out[e.Name()])
	}
	return out, nil
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// summarizeBestOfN totals the examples' verdicts over the gold set.
func summarizeBestOfN(verdicts []BestOfNInstance, gold []string, tasks map[string]BirdTask) *BestOfN {
	b := &BestOfN{Instances: append([]BestOfNInstance{}, verdicts...), Gold: len(gold)}
	sort.Slice(b.Instances, func(i, j int) bool { return b.Instances[i].InstanceID < b.Instances[j].InstanceID })
	correct := map[string]bool{}
	for _, v := range b.Instances {
		b.Correct += v.Score
		correct[v.InstanceID] = v.Score == 1
	}
	b.Total = len(b.Instances)
	if b.Total > 0 {
		b.EX = float64(b.Correct) / float64(b.Total)
	}
	if b.Gold > 0 {
		b.EXAllGold = float64(b.Correct) / float64(b.Gold)
	}
	b.ByDifficulty = byDifficulty(gold, tasks, correct)
	return b
}
