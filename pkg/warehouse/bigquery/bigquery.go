// Package bigquery is the BigQuery warehouse, on cloud.google.com/go/bigquery.
//
// Read-only, in layers: every query passes warehouse.Admit (one SELECT/WITH
// query, or a script of DECLARE, SET of a variable, CREATE TEMP FUNCTION and
// queries; no EXTERNAL_QUERY), then is dry-run: statement types other than
// SELECT (and SCRIPT for an admitted script) are refused, and so are
// queries that would scan more than the configured bytes or more than what
// is left of the run's byte budget. The real job then runs with MaximumBytesBilled, a job timeout and labels naming the run and
// example; a cancelled context calls job.Cancel, because cancelling the
// context alone leaves the server-side job running (and billing). One client
// serves the whole process (the reference built one per query).
package bigquery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	bq "cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/quorumsql/quorum/pkg/pyrepr"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Config configures the BigQuery client.
type Config struct {
	// Project is the billing project jobs run in.
	Project  string `json:"project"`
	Location string `json:"location,omitempty"`
	// CredentialsFile is a service-account key; empty uses application
	// default credentials.
	CredentialsFile string `json:"credentials_file,omitempty"`
	// MaxBytesBilled caps every query (default 10 GiB); the dry run refuses
	// bigger queries before they cost anything.
	MaxBytesBilled int64 `json:"max_bytes_billed,omitempty"`
	// JobTimeout is the server-side deadline of a job (default 5m).
	JobTimeout time.Duration `json:"job_timeout,omitempty"`
	// Endpoint overrides the API endpoint (tests, private endpoints).
	Endpoint string `json:"endpoint,omitempty"`
	// NoAuth skips authentication (tests against a fixture server).
	NoAuth bool `json:"-"`
	// AllowQueryHistory admits the account's query-history and usage views
	// (INFORMATION_SCHEMA.JOBS, JOBS_BY_USER...), which the guard refuses by
	// default: they list every user's SQL, another tenant's among them.
	AllowQueryHistory bool `json:"allow_query_history,omitempty"`
}

// Check names what is missing.
func (c Config) Check() error {
	if c.Project == "" {
		return errors.New("bigquery: missing project (GOOGLE_CLOUD_PROJECT or project in the warehouse config)")
	}
	return nil
}

// ByteBudget is the bytes a run may still scan, shared by the cluster
// (ratelimit.ByteBudget implements it in Redis).
type ByteBudget interface {
	// Spend records n bytes for run and fails if that would pass the budget.
	Spend(ctx context.Context, run string, n int64) error
}

// DB is a BigQuery warehouse.
type DB struct {
	cfg     Config
	client  *bq.Client
	budget  ByteBudget
	scanned atomic.Int64
}

// Open creates the process's client.
func Open(ctx context.Context, cfg Config, budget ByteBudget) (*DB, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.MaxBytesBilled <= 0 {
		cfg.MaxBytesBilled = 10 << 30
	}
	if cfg.JobTimeout <= 0 {
		cfg.JobTimeout = 5 * time.Minute
	}
	var opts []option.ClientOption
	if cfg.CredentialsFile != "" {
		// Any credentials file (a service account, a user's, an external
		// account), as before: its successor asks for one type.
		//lint:ignore SA1019 WithAuthCredentialsFile takes one credential type; users give files of several
		opts = append(opts, option.WithCredentialsFile(cfg.CredentialsFile))
	}
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.Endpoint))
	}
	if cfg.NoAuth {
		opts = append(opts, option.WithoutAuthentication())
	}
	c, err := bq.NewClient(ctx, cfg.Project, opts...)
	if err != nil {
		return nil, fmt.Errorf("bigquery client for project %s: %w", cfg.Project, err)
	}
	if cfg.Location != "" {
		c.Location = cfg.Location
	}
	return &DB{cfg: cfg, client: c, budget: budget}, nil
}

// Dialect implements warehouse.Warehouse.
func (d *DB) Dialect() warehouse.Dialect { return warehouse.BigQuery }

// Close closes the client.
func (d *DB) Close() error { return d.client.Close() }

// Scanned is the bytes processed by this process's queries.
func (d *DB) Scanned() int64 { return d.scanned.Load() }

var labelChars = regexp.MustCompile(`[^a-z0-9_-]`)

// Labels turns quorum's labels into BigQuery job labels (lower case,
// letters, digits, '_' and '-', at most 63 characters).
func Labels(in map[string]string) map[string]string {
	out := map[string]string{"app": "quorum"}
	for k, v := range in {
		k = labelChars.ReplaceAllString(strings.ToLower(k), "_")
		v = labelChars.ReplaceAllString(strings.ToLower(v), "_")
		if len(k) > 63 {
			k = k[:63]
		}
		if len(v) > 63 {
			v = v[:63]
		}
		if k != "" {
			out[k] = v
		}
	}
	return out
}

// CheckDryRun decides from a dry run whether a query may run. SELECT may;
// SCRIPT only when quorum's guard admitted the text as a script (only
// DECLARE, SET of a variable, CREATE TEMP FUNCTION and queries), since the
// dry run does not report the statement types inside a script; every other
// type (INSERT, MERGE, CREATE_TABLE, ...) is refused.
func CheckDryRun(statementType string, script bool, bytes, limit int64) error {
	switch {
	case statementType == "SELECT":
	case statementType == "SCRIPT" && script:
	case statementType == "SCRIPT":
		return errors.New("BigQuery says this is a script, but quorum admitted a single query; only SELECT queries may run")
	default:
		return fmt.Errorf("BigQuery says this is a %s statement; only SELECT queries (or scripts of DECLARE, SET, CREATE TEMP FUNCTION and queries) may run", statementType)
	}
	if limit > 0 && bytes > limit {
		return fmt.Errorf("the query would scan %d bytes, over the limit of %d: filter partitions (e.g. _TABLE_SUFFIX) or select fewer columns", bytes, limit)
	}
	return nil
}

func refused(msg string) error {
	return &warehouse.QueryError{Dialect: warehouse.BigQuery, Refused: true, Message: "quorum refused the statement: " + msg}
}

// Query implements warehouse.Warehouse.
func (d *DB) Query(ctx context.Context, query string, lim warehouse.Limits) (*warehouse.Result, error) {
	v, err := warehouse.Guard{AllowHistory: d.cfg.AllowQueryHistory}.Admit(warehouse.BigQuery, query)
	if err != nil {
		return nil, err
	}
	stmt := v.Text
	labels := Labels(warehouse.Labels(ctx))
	dry := d.client.Query(stmt)
	dry.DryRun, dry.Labels = true, labels
	job, err := dry.Run(ctx)
	if err != nil {
		return nil, classify(ctx, err)
	}
	st := job.LastStatus()
	if st == nil || st.Statistics == nil {
		return nil, errors.New("bigquery dry run returned no statistics")
	}
	stype := ""
	if qs, ok := st.Statistics.Details.(*bq.QueryStatistics); ok {
		stype = qs.StatementType
	}
	if err := CheckDryRun(stype, v.Script, st.Statistics.TotalBytesProcessed, d.cfg.MaxBytesBilled); err != nil {
		return nil, refused(err.Error())
	}
	if d.budget != nil {
		if err := d.budget.Spend(ctx, warehouse.Labels(ctx)["run"], st.Statistics.TotalBytesProcessed); err != nil {
			return nil, refused(err.Error())
		}
	}
	// The job's own timeout stops it on the server even if this process
	// dies; the context ends it sooner when the caller gives up.
	timeout := lim.Deadline(d.cfg.JobTimeout)
	q := d.client.Query(stmt)
	q.MaxBytesBilled, q.JobTimeout, q.Labels = d.cfg.MaxBytesBilled, timeout, labels
	qctx, cancelQuery := context.WithTimeout(ctx, timeout)
	defer cancelQuery()
	fail := func(err error) error {
		if ctx.Err() == nil && qctx.Err() != nil {
			return warehouse.Interrupted(warehouse.BigQuery, timeout)
		}
		return classify(ctx, err)
	}
	job, err = q.Run(qctx)
	if err != nil {
		return nil, fail(err)
	}
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-qctx.Done():
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = job.Cancel(cctx)
		case <-finished:
		}
	}()
	it, err := job.Read(qctx)
	if err != nil {
		return nil, fail(err)
	}
	res := &warehouse.Result{}
	for _, f := range it.Schema {
		res.Columns = append(res.Columns, warehouse.Column{Name: f.Name, Type: string(f.Type)})
	}
	for {
		var row []bq.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fail(err)
		}
		vals := make([]warehouse.Value, len(row))
		for i, v := range row {
			var f *bq.FieldSchema
			if i < len(it.Schema) {
				f = it.Schema[i]
			}
			vals[i] = ToValue(v, f)
		}
		if !res.Append(vals, lim) {
			break
		}
	}
	if s := job.LastStatus(); s != nil && s.Statistics != nil {
		d.scanned.Add(s.Statistics.TotalBytesProcessed)
	}
	if err := res.TooLarge(warehouse.BigQuery); err != nil {
		return nil, err
	}
	return res, nil
}

// classify returns the engine's message as a *warehouse.QueryError, in the
// reference's "##ERROR##" form, and the caller's cancellation as it is.
func classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("bigquery query: %w", ctx.Err())
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Code >= 400 && ge.Code < 500 && ge.Code != 401 && ge.Code != 403 && ge.Code != 429 {
		msg := ge.Message
		if msg == "" && len(ge.Errors) > 0 {
			msg = ge.Errors[0].Message
		}
		return &warehouse.QueryError{Dialect: warehouse.BigQuery, Message: "##ERROR##" + msg}
	}
	return fmt.Errorf("bigquery query: %w", err)
}

// ToValue converts a BigQuery value to the cell Spider 2.0's gold files
// show: NUMERIC/BIGNUMERIC exactly, DATE/DATETIME/TIME/TIMESTAMP as Python
// prints them (TIMESTAMP in UTC with +00:00), nested and repeated fields as
// JSON text.
func ToValue(v bq.Value, f *bq.FieldSchema) warehouse.Value {
	if cell, ok := warehouse.BasicValue(v); ok {
		return cell
	}
	switch x := v.(type) {
	case *big.Rat:
		return warehouse.TextValue(Decimal(x))
	case civil.Date:
		return warehouse.TextValue(x.String())
	case civil.Time:
		return warehouse.TextValue(pyrepr.Clock(time.Date(0, 1, 1, x.Hour, x.Minute, x.Second, x.Nanosecond, time.UTC)))
	case civil.DateTime:
		return warehouse.TextValue(pyrepr.Datetime(x.In(time.UTC), false))
	case time.Time:
		return warehouse.TextValue(pyrepr.Datetime(x.UTC(), true))
	case []bq.Value:
		b, _ := json.Marshal(jsonValue(x, f))
		return warehouse.TextValue(string(b))
	}
	return warehouse.TextValue(fmt.Sprint(v))
}

// jsonValue turns nested values into JSON-encodable ones, naming struct
// fields from the schema.
func jsonValue(v bq.Value, f *bq.FieldSchema) any {
	switch x := v.(type) {
	case []bq.Value:
		if f != nil && f.Repeated {
			elem := *f
			elem.Repeated = false
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = jsonValue(e, &elem)
			}
			return out
		}
		if f != nil && len(f.Schema) == len(x) {
			m := make(map[string]any, len(x))
			for i, e := range x {
				m[f.Schema[i].Name] = jsonValue(e, f.Schema[i])
			}
			return m
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e, nil)
		}
		return out
	case *big.Rat:
		return json.Number(Decimal(x))
	case nil, int64, float64, bool, string:
		return x
	}
	return ToValue(v, f).CSV()
}

// Decimal renders a NUMERIC or BIGNUMERIC exactly, without trailing zeros.
func Decimal(r *big.Rat) string {
	s := r.FloatString(38)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}
