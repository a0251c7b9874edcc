package warehouse_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

// TestGuardRefusesQueryHistoryByDefault: the engines' query history and
// account usage, through which one tenant could list another's SQL (the
// rerun endpoint runs what a user writes), are refused by the default
// guard with a refused *QueryError naming what was read, and admitted
// only by a Guard that allows them. SHOW stays refused either way.
func TestGuardRefusesQueryHistoryByDefault(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d         warehouse.Dialect
		sql, want string
		// show: refused even when history is allowed.
		show bool
	}{
		{d: warehouse.Snowflake, sql: "SELECT query_text, user_name FROM SNOWFLAKE.ACCOUNT_USAGE.QUERY_HISTORY", want: "SNOWFLAKE.ACCOUNT_USAGE.QUERY_HISTORY"},
		{d: warehouse.Snowflake, sql: "select * from snowflake.organization_usage.query_history", want: "organization_usage"},
		{d: warehouse.Snowflake, sql: "SELECT * FROM SNOWFLAKE.ACCOUNT_USAGE.ACCESS_HISTORY", want: "ACCESS_HISTORY"},
		{d: warehouse.Snowflake, sql: "SELECT * FROM SNOWFLAKE.ACCOUNT_USAGE.LOGIN_HISTORY", want: "LOGIN_HISTORY"},
		{d: warehouse.Snowflake, sql: "SELECT * FROM TABLE(INFORMATION_SCHEMA.QUERY_HISTORY())", want: "QUERY_HISTORY"},
		{d: warehouse.Snowflake, sql: `SELECT * FROM TABLE("INFORMATION_SCHEMA"."QUERY_HISTORY_BY_USER"())`, want: "QUERY_HISTORY_BY_USER"},
		{d: warehouse.Snowflake, sql: "SELECT * FROM TABLE(RESULT_SCAN(LAST_QUERY_ID(-1)))", want: "RESULT_SCAN"},
		{d: warehouse.BigQuery, sql: "SELECT query FROM `region-us`.INFORMATION_SCHEMA.JOBS", want: "INFORMATION_SCHEMA.JOBS"},
		{d: warehouse.BigQuery, sql: "SELECT query FROM `region-us`.INFORMATION_SCHEMA.JOBS_BY_USER", want: "JOBS_BY_USER"},
		{d: warehouse.BigQuery, sql: "SELECT query FROM `region-us`.INFORMATION_SCHEMA.JOBS_BY_PROJECT", want: "JOBS_BY_PROJECT"},
		{d: warehouse.BigQuery, sql: "SELECT query FROM `region-us.INFORMATION_SCHEMA.JOBS_BY_ORGANIZATION`", want: "JOBS_BY_ORGANIZATION"},
		{d: warehouse.Snowflake, sql: "SHOW TERSE QUERIES", want: "SHOW", show: true},
		{d: warehouse.Snowflake, sql: "SELECT 1 ->> SHOW USERS", want: "->>", show: true},
	}
	for _, tt := range tests {
		text, err := warehouse.CheckReadOnly(tt.d, tt.sql)
		var qe *warehouse.QueryError
		if text != "" || !errors.As(err, &qe) || !qe.Refused || !strings.Contains(qe.Message, tt.want) {
			t.Errorf("%s %q: default guard gave %q, %v; want a refused *QueryError naming %s", tt.d, tt.sql, text, err, tt.want)
		}
		if _, err := (warehouse.Guard{}).Admit(tt.d, tt.sql); err == nil {
			t.Errorf("%s %q: the zero Guard admitted it", tt.d, tt.sql)
		}
		_, err = warehouse.Guard{AllowHistory: true}.Admit(tt.d, tt.sql)
		if tt.show && err == nil {
			t.Errorf("%s %q: admitted when history is allowed, want refused", tt.d, tt.sql)
		}
		if !tt.show && err != nil {
			t.Errorf("%s %q: refused when history is allowed: %v", tt.d, tt.sql, err)
		}
	}
}
