// Package reforce implements the ReFoRCE agent's steps (Deng et al.,
// "ReFoRCE: A Text-to-SQL Agent with Self-Refinement, Consensus Enforcement,
// and Column Exploration"): expected-answer-format restriction,
// self-refining candidates, majority-vote consensus, column exploration for
// low-confidence examples, regeneration from its findings, and the final
// fallbacks (the shared vote of package vote). Its task kinds and decision
// step (seam.go) plug these steps into the runtime through
// pkg/runtime/agent, the one way it runs, on a cluster or in one process.
//
// Every step takes the LLM client and the warehouse through interfaces,
// takes a seed, and reports its calls, tokens and warehouse queries.
package reforce

import (
	"errors"
	"strings"

	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Config configures the agent. The zero value of a field means its default.
type Config struct {
	// Votes is the number of candidates per round (default 8).
	Votes int
	// MaxIter is the self-refinement budget per candidate (default 5).
	MaxIter int
	// EmptyStop ends a candidate after this many empty results in a row
	// (default 4).
	EmptyStop int
	// Reasks asks again for exactly one SQL up to this many times per
	// iteration (default 3).
	Reasks int
	// Temperature of generation and exploration calls (the paper uses 1).
	Temperature *float64
	// FormatRestriction, SelfConsistency, CTERefine and ModelVote are the
	// options of the paper's first version.
	FormatRestriction bool
	SelfConsistency   bool
	CTERefine         bool
	ModelVote         bool
	// NoExploration skips column exploration: low-confidence examples go
	// straight to the final fallbacks (the paper's cheaper setting).
	NoExploration bool
	// PoolRounds makes the final vote of an explored example pool the
	// first round's candidates with the exploration round's. By default
	// it is over the exploration round's alone, as in the paper (eq. 7)
	// and the reference, whose second step replaced the first's
	// candidates.
	PoolRounds bool
	// Ablations of the paper's v2 Table 3:
	//
	// ExploreAll is "Column Exploration Only": every example starts with
	// column exploration (one exploration and regeneration per vote), with
	// no first round and no first vote; the final vote is over the
	// exploration round.
	ExploreAll bool
	// NoVote is "w/o Majority Voting": one candidate per example (Votes is
	// 1) and no consensus: it is the answer, with no exploration unless
	// ExploreAll.
	NoVote bool
	// NoRandomSelection is "w/o Random Selection": a tie of the final vote
	// is left unanswered (MethodUnresolved) instead of the seeded random
	// pick (the paper's random_select, eq. 7). A model vote (ModelVote)
	// still breaks ties.
	NoRandomSelection bool
	// NoCompression is "w/o DB Info Compression": the table information
	// is built with dbinfo.Uncompressed (no grouping, no oversize rules;
	// schema linking still applies over budget). Compression otherwise
	// names the mode: "paper" (default) or "structural".
	NoCompression bool
	Compression   string
	// GoldTables and GoldSchema are "w/ Gold Table" (Table 3) and "w/
	// Gold Schema" (Table 4): the table information keeps only the tables
	// (and, for GoldSchema, the columns) the example's gold SQL names
	// (dbinfo.Restrict). An example without gold SQL keeps its schema.
	GoldTables, GoldSchema bool
	Explore                ExploreConfig
	// ResultLimits cap candidate results; zero keeps them whole (the
	// reference silently cut them at 30 KB).
	ResultLimits warehouse.Limits
}

// defaultVotes is the candidates per round when the options name none:
// the paper's 8.
const defaultVotes = 8

func (c *Config) defaults() {
	if c.NoVote {
		c.Votes = 1
	}
	if c.Votes <= 0 {
		c.Votes = defaultVotes
	}
	if c.MaxIter <= 0 {
		c.MaxIter = 5
	}
	if c.EmptyStop <= 0 {
		c.EmptyStop = 4
	}
	if c.Reasks <= 0 {
		c.Reasks = 3
	}
	if c.Temperature == nil {
		one := 1.0
		c.Temperature = &one
	}
	if c.Explore == (ExploreConfig{}) {
		c.Explore = DefaultExploreConfig()
	}
}

// DBInfoOptions are the options the table information is built with:
// the compression mode, or none with NoCompression.
func (c Config) DBInfoOptions() (dbinfo.Options, error) {
	if c.NoCompression {
		return dbinfo.Uncompressed(), nil
	}
	return dbinfo.ModeOptions(c.Compression)
}

// Restrict applies the gold ablations to an example's table information;
// it reports whether the schema was restricted.
func (c Config) Restrict(info *dbinfo.Info, goldSQL string) (*dbinfo.Info, bool) {
	if !(c.GoldTables || c.GoldSchema) || strings.TrimSpace(goldSQL) == "" {
		return info, false
	}
	r := dbinfo.Restrict(info, goldSQL, c.GoldSchema)
	return r, r != info
}

// Agent runs ReFoRCE's steps.
type Agent struct {
	cfg Config
	llm llm.Client
}

// New returns an agent.
func New(cfg Config, client llm.Client) (*Agent, error) {
	if client == nil {
		return nil, errors.New("reforce: an LLM client is required")
	}
	cfg.defaults()
	return &Agent{cfg: cfg, llm: client}, nil
}

// Config returns the effective configuration.
func (a *Agent) Config() Config { return a.cfg }
