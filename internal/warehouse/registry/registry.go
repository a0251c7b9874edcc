// Package registry holds the configured warehouses: each has a name (the
// subject token workers filter on), a kind (sqlite, snowflake or bigquery),
// its connection settings and its quotas. It routes examples to warehouses
// and opens each remote warehouse once per process, within its quota.
package registry

import (
	"context"
	"fmt"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"
	"os"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/bigquery"
	"github.com/quorumsql/quorum/pkg/warehouse/snowflake"
)

// Quota is a warehouse's share of the cluster: enforced in Redis across
// every worker.
type Quota struct {
	QueriesPerSecond float64 `json:"qps,omitempty"`
	MaxConcurrent    int     `json:"max_concurrent,omitempty"`
	// BytesPerRun bounds what one run may scan (BigQuery).
	BytesPerRun int64 `json:"bytes_per_run,omitempty"`
}

// Spec is one configured warehouse.
type Spec struct {
	Name string            `json:"name"`
	Kind warehouse.Dialect `json:"kind"`
	// Databases, when set, limits the dataset databases routed here;
	// otherwise every database of the kind is.
	Databases []string          `json:"databases,omitempty"`
	Quota     Quota             `json:"quota,omitempty"`
	Snowflake *snowflake.Config `json:"snowflake,omitempty"`
	BigQuery  *bigquery.Config  `json:"bigquery,omitempty"`
}

// File is a warehouses configuration file.
type File struct {
	Warehouses []Spec `json:"warehouses"`
}

// Load reads a YAML or JSON configuration and checks it.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("warehouses config: %w", err)
	}
	var f File
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("warehouses config %s: %w", path, err)
	}
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("warehouses config %s: %w", path, err)
	}
	return &f, nil
}

// Default is one warehouse per kind, named after it; Snowflake and BigQuery
// take their settings from the environment.
func Default(getenv func(string) string) *File {
	sf := snowflake.Config{}.FromEnv(getenv)
	return &File{Warehouses: []Spec{
		{Name: "sqlite", Kind: warehouse.SQLite},
		{Name: "snowflake", Kind: warehouse.Snowflake, Snowflake: &sf},
		{Name: "bigquery", Kind: warehouse.BigQuery, BigQuery: &bigquery.Config{Project: getenv("GOOGLE_CLOUD_PROJECT"),
			Location: getenv("BIGQUERY_LOCATION"), CredentialsFile: getenv("GOOGLE_APPLICATION_CREDENTIALS")}},
	}}
}

// Check validates names, kinds and settings.
func (f *File) Check() error {
	seen := map[string]bool{}
	for i, s := range f.Warehouses {
		if s.Name == "" || strings.ContainsAny(s.Name, ". *>") {
			return fmt.Errorf("warehouse %d: name %q must be a single word (letters, digits, '-', '_')", i+1, s.Name)
		}
		if seen[s.Name] {
			return fmt.Errorf("warehouse %q is configured twice", s.Name)
		}
		seen[s.Name] = true
		if _, err := warehouse.ParseDialect(string(s.Kind)); err != nil {
			return fmt.Errorf("warehouse %q: %w", s.Name, err)
		}
	}
	return nil
}

// Route names the warehouse of an example's database.
func (f *File) Route(e *dataset.Example) (string, error) {
	for _, s := range f.Warehouses {
		if s.Kind != e.Dialect {
			continue
		}
		if len(s.Databases) == 0 {
			return s.Name, nil
		}
		for _, db := range s.Databases {
			if strings.EqualFold(db, e.DB) {
				return s.Name, nil
			}
		}
	}
	return "", fmt.Errorf("%s: no %s warehouse is configured for database %q", e.ID, e.Dialect, e.DB)
}

// Spec returns the warehouse named name.
func (f *File) Spec(name string) (Spec, bool) {
	for _, s := range f.Warehouses {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// Gates returns a warehouse's quota gate (nil when it has none).
type Gates func(name string, q Quota) (warehouse.Gate, error)

// Budgets returns a BigQuery byte budget (nil when it has none).
type Budgets func(q Quota) bigquery.ByteBudget

// Registry opens warehouses for one process.
type Registry struct {
	File    *File
	Gates   Gates
	Budgets Budgets

	mu     sync.Mutex
	remote map[string]warehouse.Warehouse
	gates  map[string]warehouse.Gate
}

// Open returns the warehouse an example runs on: its SQLite file through
// local, or the process's connection to its Snowflake or BigQuery
// warehouse, within the warehouse's quota.
func (r *Registry) Open(ctx context.Context, e *dataset.Example, local *localdb.Warehouses) (warehouse.Warehouse, error) {
	name, err := r.File.Route(e)
	if err != nil {
		return nil, err
	}
	spec, _ := r.File.Spec(name)
	var wh warehouse.Warehouse
	if spec.Kind == warehouse.SQLite {
		if wh, err = local.For(e); err != nil {
			return nil, err
		}
	} else if wh, err = r.remoteFor(ctx, spec); err != nil {
		return nil, err
	}
	g, err := r.gate(spec)
	if err != nil || g == nil {
		return wh, err
	}
	return &warehouse.Gated{W: wh, G: g}, nil
}

func (r *Registry) remoteFor(ctx context.Context, spec Spec) (warehouse.Warehouse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if wh, ok := r.remote[spec.Name]; ok {
		return wh, nil
	}
	var wh warehouse.Warehouse
	var err error
	switch spec.Kind {
	case warehouse.Snowflake:
		if spec.Snowflake == nil {
			return nil, fmt.Errorf("warehouse %q has no snowflake settings", spec.Name)
		}
		wh, err = snowflake.Open(*spec.Snowflake)
	case warehouse.BigQuery:
		if spec.BigQuery == nil {
			return nil, fmt.Errorf("warehouse %q has no bigquery settings", spec.Name)
		}
		var budget bigquery.ByteBudget
		if r.Budgets != nil && spec.Quota.BytesPerRun > 0 {
			budget = r.Budgets(spec.Quota)
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		wh, err = bigquery.Open(cctx, *spec.BigQuery, budget)
	}
	if err != nil {
		return nil, fmt.Errorf("warehouse %q: %w", spec.Name, err)
	}
	if r.remote == nil {
		r.remote = map[string]warehouse.Warehouse{}
	}
	r.remote[spec.Name] = wh
	return wh, nil
}

func (r *Registry) gate(spec Spec) (warehouse.Gate, error) {
	if r.Gates == nil || (spec.Quota.QueriesPerSecond <= 0 && spec.Quota.MaxConcurrent <= 0) {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if g, ok := r.gates[spec.Name]; ok {
		return g, nil
	}
	g, err := r.Gates(spec.Name, spec.Quota)
	if err != nil {
		return nil, err
	}
	if r.gates == nil {
		r.gates = map[string]warehouse.Gate{}
	}
	r.gates[spec.Name] = g
	return g, nil
}

// Close closes the remote connections.
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, wh := range r.remote {
		_ = wh.Close()
	}
	r.remote = nil
	return nil
}

// WithLimiter is a Registry whose quotas are enforced by the shared Redis
// limiter: QPS and concurrency gates, and BigQuery byte budgets per run.
func WithLimiter(file *File, lim *ratelimit.Limiter) *Registry {
	return &Registry{File: file,
		Gates: func(name string, q Quota) (warehouse.Gate, error) {
			return lim.WarehouseGate(name, ratelimit.WarehouseQuota{QueriesPerSecond: q.QueriesPerSecond, MaxConcurrent: q.MaxConcurrent})
		},
		Budgets: func(q Quota) bigquery.ByteBudget { return &ratelimit.ByteBudget{Limiter: lim, Limit: q.BytesPerRun} },
	}
}
