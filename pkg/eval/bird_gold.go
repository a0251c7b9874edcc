package eval

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

// BirdGold scores results against each example's gold SQL under BIRD's
// rule, running every gold query once however many predictions and
// candidates are scored against it. It is safe for concurrent use.
type BirdGold struct {
	// Runner executes the gold (and predicted) SQL on the example's
	// database; its queries are bounded by its own timeout.
	Runner SQLRunner
	// ResultLimits are the limits Runner applies; a result they cut cannot
	// be compared and is an error naming them.
	ResultLimits warehouse.Limits
	// Limits bound the CSVs read and rendered (ScoreCSV).
	Limits Limits

	mu   sync.Mutex
	gold map[string]*birdGoldResult
}

type birdGoldResult struct {
	once sync.Once
	res  *warehouse.Result
	err  error

	frameOnce sync.Once
	frame     *Frame
	frameErr  error
}

func (g *BirdGold) entry(id string) *birdGoldResult {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gold == nil {
		g.gold = map[string]*birdGoldResult{}
	}
	e := g.gold[id]
	if e == nil {
		e = &birdGoldResult{}
		g.gold[id] = e
	}
	return e
}

// Result runs id's gold SQL the first time it is asked for and returns its
// result, the same one every later time; a failure (an SQL error, a
// timeout, a result cut by the limits) is returned as "gold SQL: …".
func (g *BirdGold) Result(ctx context.Context, id, goldSQL string) (*warehouse.Result, error) {
	e := g.entry(id)
	e.once.Do(func() {
		if strings.TrimSpace(goldSQL) == "" {
			e.err = fmt.Errorf("gold SQL: instance %s has none", id)
			return
		}
		res, _, err := g.Runner.RunInstanceSQL(ctx, id, goldSQL)
		switch {
		case err != nil:
			e.err = fmt.Errorf("gold SQL: %w", err)
		case res.Truncated:
			e.err = fmt.Errorf("gold SQL: %w", truncatedError(res, g.ResultLimits, "the query"))
		default:
			e.res = res
		}
	})
	return e.res, e.err
}

// frame is the gold result as a table read back from CSV, as a stored
// result table is.
func (g *BirdGold) frame(ctx context.Context, id, goldSQL string) (*Frame, error) {
	res, err := g.Result(ctx, id, goldSQL)
	if err != nil {
		return nil, err
	}
	e := g.entry(id)
	e.frameOnce.Do(func() {
		if e.frame, e.frameErr = FrameFromResultLimited(res, g.Limits); e.frameErr != nil {
			e.frameErr = fmt.Errorf("gold SQL result: %w", e.frameErr)
		}
	})
	return e.frame, e.frameErr
}

// Frame is the gold result of example id as a table, run once and kept
// until Forget (for a reader's diff, DiffRows).
func (g *BirdGold) Frame(ctx context.Context, id, goldSQL string) (*Frame, error) {
	return g.frame(ctx, id, goldSQL)
}

// Forget drops id's gold result, once nothing more is scored against it.
func (g *BirdGold) Forget(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.gold, id)
}

// ScoreSQL runs a predicted query and compares its rows with the gold
// rows, as BIRD's sql-mode evaluation does (the prediction runs first).
func (g *BirdGold) ScoreSQL(ctx context.Context, id, goldSQL, predSQL string) (bool, error) {
	res, _, err := g.Runner.RunInstanceSQL(ctx, id, predSQL)
	if err != nil {
		return false, err
	}
	if res.Truncated {
		return false, truncatedError(res, g.ResultLimits, "the prediction")
	}
	gold, err := g.Result(ctx, id, goldSQL)
	if err != nil {
		return false, err
	}
	return BirdEqual(res.Rows, gold.Rows), nil
}

// ScoreCSV compares a stored result table (CSV text; "" for a query that
// returned no rows) with the gold result rendered the same way, as BIRD's
// exec_result comparison does (BirdEqualFrames).
func (g *BirdGold) ScoreCSV(ctx context.Context, id, goldSQL, csv string) (bool, error) {
	var pred *Frame
	if strings.TrimSpace(csv) != "" {
		var err error
		if pred, err = readCSVText(csv, g.Limits.withDefaults()); err != nil {
			return false, fmt.Errorf("result table: %w", err)
		}
	}
	gold, err := g.frame(ctx, id, goldSQL)
	if err != nil {
		return false, err
	}
	return BirdEqualFrames(pred, gold), nil
}
