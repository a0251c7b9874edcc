// Package snowflake is the Snowflake warehouse, on gosnowflake.
//
// Read-only, in layers: every statement passes warehouse.CheckReadOnly (one
// SELECT, WITH or VALUES query, no write after a CTE, no SYSTEM$ control
// function); the session and every query set MULTI_STATEMENT_COUNT=1, so the
// server itself refuses "…; DROP …" piggy-backs whatever the account default;
// and users should connect with a role that only has USAGE and SELECT (see
// docs/warehouses.md). Each query carries a QUERY_TAG
// naming its run and example, runs under STATEMENT_TIMEOUT_IN_SECONDS, and a
// cancelled context makes the driver POST abort-request, which stops the
// query on the server.
package snowflake

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"database/sql"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	sf "github.com/snowflakedb/gosnowflake"

	"github.com/quorumsql/quorum/pkg/pyrepr"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Config configures a Snowflake connection. Exactly one authentication
// applies: PrivateKeyFile (key-pair JWT), OAuthToken, or Password.
type Config struct {
	Account   string `json:"account"`
	User      string `json:"user"`
	Role      string `json:"role,omitempty"`
	Warehouse string `json:"warehouse,omitempty"`
	Database  string `json:"database,omitempty"`
	Schema    string `json:"schema,omitempty"`

	Password             string `json:"password,omitempty"`
	PrivateKeyFile       string `json:"private_key_file,omitempty"`
	PrivateKeyPassphrase string `json:"private_key_passphrase,omitempty"`
	OAuthToken           string `json:"oauth_token,omitempty"`

	// StatementTimeout bounds each query on the server (default 5m).
	StatementTimeout time.Duration `json:"statement_timeout,omitempty"`
	MaxOpenConns     int           `json:"max_open_conns,omitempty"`

	// Host, Port and Protocol override the account URL (private link,
	// tests).
	Host     string `json:"host,omitempty"`
	Port     int    `json:"port,omitempty"`
	Protocol string `json:"protocol,omitempty"`

	// AllowQueryHistory admits the account's query-history and usage views
	// (QUERY_HISTORY, SNOWFLAKE.ACCOUNT_USAGE...), which the guard refuses by
	// default: they list every user's SQL, another tenant's among them.
	AllowQueryHistory bool `json:"allow_query_history,omitempty"`
}

// FromEnv fills empty fields from SNOWFLAKE_ACCOUNT, SNOWFLAKE_USER,
// SNOWFLAKE_PASSWORD, SNOWFLAKE_PRIVATE_KEY_FILE,
// SNOWFLAKE_PRIVATE_KEY_PASSPHRASE, SNOWFLAKE_OAUTH_TOKEN, SNOWFLAKE_ROLE,
// SNOWFLAKE_WAREHOUSE, SNOWFLAKE_DATABASE and SNOWFLAKE_SCHEMA.
func (c Config) FromEnv(getenv func(string) string) Config {
	fill := func(dst *string, key string) {
		if *dst == "" {
			*dst = getenv(key)
		}
	}
	fill(&c.Account, "SNOWFLAKE_ACCOUNT")
	fill(&c.User, "SNOWFLAKE_USER")
	fill(&c.Password, "SNOWFLAKE_PASSWORD")
	fill(&c.PrivateKeyFile, "SNOWFLAKE_PRIVATE_KEY_FILE")
	fill(&c.PrivateKeyPassphrase, "SNOWFLAKE_PRIVATE_KEY_PASSPHRASE")
	fill(&c.OAuthToken, "SNOWFLAKE_OAUTH_TOKEN")
	fill(&c.Role, "SNOWFLAKE_ROLE")
	fill(&c.Warehouse, "SNOWFLAKE_WAREHOUSE")
	fill(&c.Database, "SNOWFLAKE_DATABASE")
	fill(&c.Schema, "SNOWFLAKE_SCHEMA")
	return c
}

// LoadFile reads a JSON config file: this package's keys, or the
// snowflake_credential.json that Spider 2.0 users already have ({"user",
// "password", "account", ...}).
func LoadFile(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("snowflake config: %w", err)
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("snowflake config %s: %w", path, err)
	}
	return c, nil
}

// Check reports what is missing or contradictory, naming the setting.
func (c Config) Check() error {
	var missing []string
	if c.Account == "" && c.Host == "" {
		missing = append(missing, "account (SNOWFLAKE_ACCOUNT)")
	}
	if c.User == "" {
		missing = append(missing, "user (SNOWFLAKE_USER)")
	}
	auth := 0
	for _, s := range []string{c.Password, c.PrivateKeyFile, c.OAuthToken} {
		if s != "" {
			auth++
		}
	}
	if auth == 0 {
		missing = append(missing, "a password, private_key_file or oauth_token")
	}
	if len(missing) > 0 {
		return fmt.Errorf("snowflake: missing %s", strings.Join(missing, ", "))
	}
	if auth > 1 {
		return errors.New("snowflake: set only one of password, private_key_file and oauth_token")
	}
	return nil
}

// String describes the connection without secrets, for logs.
func (c Config) String() string {
	auth := "password"
	switch {
	case c.PrivateKeyFile != "":
		auth = "key-pair"
	case c.OAuthToken != "":
		auth = "oauth"
	}
	return fmt.Sprintf("snowflake account=%s user=%s role=%s warehouse=%s auth=%s", c.Account, c.User, c.Role, c.Warehouse, auth)
}

// driverConfig builds gosnowflake's configuration.
func (c Config) driverConfig() (*sf.Config, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	secs := strconv.Itoa(int(c.statementTimeout().Seconds()))
	// One statement per request, on the session too: an account or user
	// may have set MULTI_STATEMENT_COUNT=0 (any number).
	one := "1"
	dc := &sf.Config{Account: c.Account, User: c.User, Role: c.Role, Warehouse: c.Warehouse, Database: c.Database, Schema: c.Schema,
		Host: c.Host, Port: c.Port, Protocol: c.Protocol, Application: "quorum",
		Params: map[string]*string{"STATEMENT_TIMEOUT_IN_SECONDS": &secs, "MULTI_STATEMENT_COUNT": &one},
		// LoginTimeout and DisableTelemetry have no successor yet.
		//lint:ignore SA1019 the driver has no other way to bound a login or turn its telemetry off
		LoginTimeout: 60 * time.Second, DisableTelemetry: true}
	switch {
	case c.PrivateKeyFile != "":
		key, err := readPrivateKey(c.PrivateKeyFile, c.PrivateKeyPassphrase)
		if err != nil {
			return nil, err
		}
		dc.Authenticator, dc.PrivateKey = sf.AuthTypeJwt, key
	case c.OAuthToken != "":
		dc.Authenticator, dc.Token = sf.AuthTypeOAuth, c.OAuthToken
	default:
		dc.Authenticator, dc.Password = sf.AuthTypeSnowflake, c.Password
	}
	return dc, nil
}

// DSN is gosnowflake's connection string for the configuration, with the
// secrets in it; never log it (String is for logs).
func (c Config) DSN() (string, error) {
	dc, err := c.driverConfig()
	if err != nil {
		return "", err
	}
	return sf.DSN(dc)
}

func readPrivateKey(path, passphrase string) (*rsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("snowflake private key: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("snowflake private key %s: no PEM block", path)
	}
	if passphrase != "" || block.Type == "ENCRYPTED PRIVATE KEY" {
		return nil, fmt.Errorf("snowflake private key %s: encrypted keys are not supported; decrypt it with openssl pkcs8 into an unencrypted PKCS#8 key readable only by quorum", path)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		if k, err2 := x509.ParsePKCS1PrivateKey(block.Bytes); err2 == nil {
			return k, nil
		}
		return nil, fmt.Errorf("snowflake private key %s: %w", path, err)
	}
	k, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("snowflake private key %s: not an RSA key", path)
	}
	return k, nil
}

// DB is a Snowflake warehouse, safe for concurrent use.
type DB struct {
	cfg Config
	db  *sql.DB
	// timeout is the session's STATEMENT_TIMEOUT_IN_SECONDS.
	timeout time.Duration
}

// statementTimeout is the session's statement timeout (default 5m).
func (c Config) statementTimeout() time.Duration {
	if c.StatementTimeout <= 0 {
		return 5 * time.Minute
	}
	return c.StatementTimeout
}

// Open prepares a connection pool; it logs in on first use.
func Open(cfg Config) (*DB, error) {
	dc, err := cfg.driverConfig()
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(sf.NewConnector(sf.SnowflakeDriver{}, *dc))
	n := cfg.MaxOpenConns
	if n <= 0 {
		n = 8
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	return &DB{cfg: cfg, db: db, timeout: cfg.statementTimeout()}, nil
}

// Dialect implements warehouse.Warehouse.
func (d *DB) Dialect() warehouse.Dialect { return warehouse.Snowflake }

// Close closes the pool.
func (d *DB) Close() error { return d.db.Close() }

// QueryTag renders labels as a QUERY_TAG ("quorum run=r1 example=sf001").
func QueryTag(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("quorum")
	for _, k := range keys {
		b.WriteString(" " + k + "=" + labels[k])
	}
	return b.String()
}

// Query implements warehouse.Warehouse.
func (d *DB) Query(ctx context.Context, query string, lim warehouse.Limits) (*warehouse.Result, error) {
	stmt, err := warehouse.Guard{AllowHistory: d.cfg.AllowQueryHistory}.CheckReadOnly(warehouse.Snowflake, query)
	if err != nil {
		return nil, err
	}
	qctx := sf.WithQueryTag(ctx, QueryTag(warehouse.Labels(ctx)))
	// The request carries MULTI_STATEMENT_COUNT=1: Snowflake runs exactly
	// one statement or fails the request.
	qctx, err = sf.WithMultiStatement(qctx, 1)
	if err != nil {
		return nil, err
	}
	// The session's STATEMENT_TIMEOUT_IN_SECONDS stops the query on the
	// server; a shorter per-query deadline ends the context, on which the
	// driver aborts the query server-side too.
	if lim.Timeout > 0 && lim.Timeout < d.timeout {
		var cancel context.CancelFunc
		qctx, cancel = context.WithTimeout(qctx, lim.Timeout)
		defer cancel()
	}
	fail := func(err error) error {
		if ctx.Err() == nil && qctx.Err() != nil {
			return warehouse.Interrupted(warehouse.Snowflake, lim.Timeout)
		}
		return classify(ctx, err)
	}
	rows, err := d.db.QueryContext(qctx, stmt)
	if err != nil {
		return nil, fail(err)
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, fail(err)
	}
	scales := make([]int64, len(types))
	for i, t := range types {
		if _, s, ok := t.DecimalSize(); ok {
			scales[i] = s
		}
	}
	res, err := warehouse.ScanRows(rows, lim, func(v any, col int) warehouse.Value {
		return ToValue(v, types[col].DatabaseTypeName(), scales[col])
	})
	if err != nil {
		return nil, fail(err)
	}
	if err := res.TooLarge(warehouse.Snowflake); err != nil {
		return nil, err
	}
	return res, nil
}

// classify returns engine errors as *warehouse.QueryError in the form the
// reference showed the model ("##ERROR##002003 (42S02): SQL compilation
// error: ..."), and the caller's cancellation as it is.
func classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("snowflake query: %w", ctx.Err())
	}
	var se *sf.SnowflakeError
	if errors.As(err, &se) && se.SQLState != "" {
		return &warehouse.QueryError{Dialect: warehouse.Snowflake, Message: FormatError(se.Number, se.SQLState, se.Error())}
	}
	return fmt.Errorf("snowflake query: %w", err)
}

// FormatError renders an engine error as the reference did.
func FormatError(number int, sqlState, message string) string {
	prefix := fmt.Sprintf("%06d (%s): ", number, sqlState)
	return "##ERROR##" + prefix + strings.TrimPrefix(message, prefix)
}

// ToValue converts a value as gosnowflake returns it for a column of the
// given Snowflake type to the cell Spider 2.0's gold files show: NUMBER
// with scale as its decimal text (Python's Decimal), FLOAT as a float,
// VARIANT/OBJECT/ARRAY as their JSON text, dates and timestamps as Python
// prints them (aware timestamps with their offset), BINARY as bytes.
func ToValue(v any, dbType string, scale int64) warehouse.Value {
	if v == nil {
		return warehouse.Value{}
	}
	switch strings.ToUpper(dbType) {
	case "FIXED", "NUMBER", "DECIMAL":
		s := fmt.Sprint(v)
		if scale == 0 {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return warehouse.IntValue(n)
			}
		}
		return warehouse.TextValue(s)
	case "REAL", "FLOAT", "DOUBLE", "DECFLOAT":
		switch x := v.(type) {
		case float64:
			return warehouse.FloatValue(x)
		case string:
			if f, err := strconv.ParseFloat(x, 64); err == nil {
				return warehouse.FloatValue(f)
			}
			return warehouse.TextValue(x)
		}
	case "BOOLEAN":
		switch x := v.(type) {
		case bool:
			return warehouse.BoolValue(x)
		case string:
			return warehouse.BoolValue(x == "1" || strings.EqualFold(x, "true"))
		}
	case "DATE":
		if t, ok := v.(time.Time); ok {
			return warehouse.TextValue(t.Format("2006-01-02"))
		}
	case "TIME":
		if t, ok := v.(time.Time); ok {
			return warehouse.TextValue(pyrepr.Clock(t))
		}
	case "TIMESTAMP_NTZ":
		if t, ok := v.(time.Time); ok {
			return warehouse.TextValue(pyrepr.Datetime(t, false))
		}
	case "TIMESTAMP_LTZ", "TIMESTAMP_TZ":
		if t, ok := v.(time.Time); ok {
			return warehouse.TextValue(pyrepr.Datetime(t, true))
		}
	case "BINARY":
		if b, ok := v.([]byte); ok {
			return warehouse.BytesValue(b)
		}
	}
	switch x := v.(type) {
	case string:
		return warehouse.TextValue(x)
	case []byte:
		return warehouse.TextValue(string(x))
	case int64:
		return warehouse.IntValue(x)
	case float64:
		return warehouse.FloatValue(x)
	case bool:
		return warehouse.BoolValue(x)
	case time.Time:
		return warehouse.TextValue(pyrepr.Datetime(x, false))
	}
	return warehouse.TextValue(fmt.Sprint(v))
}
