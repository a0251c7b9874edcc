package sqltext

import (
	"strings"
	"testing"
)

// TestClassifyRefusesQueryHistory: reads of the engines' query history and
// account usage, however the names are spelt (any case, quoted, split
// across quotes, with comments between the parts), are refused unless the
// policy allows them; then they are admitted like any query.
func TestClassifyRefusesQueryHistory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d         Dialect
		sql, want string
	}{
		{Snowflake, "SELECT query_text FROM SNOWFLAKE.ACCOUNT_USAGE.QUERY_HISTORY", "SNOWFLAKE.ACCOUNT_USAGE.QUERY_HISTORY"},
		{Snowflake, "select * from snowflake.account_usage.login_history", "the account's usage and history"},
		{Snowflake, `SELECT * FROM "SNOWFLAKE"."ACCOUNT_USAGE"."ACCESS_HISTORY"`, "ACCESS_HISTORY"},
		{Snowflake, "SELECT * FROM snowflake . /* x */ account_usage . query_history", "account_usage"},
		{Snowflake, "SELECT * FROM SNOWFLAKE.ORGANIZATION_USAGE.QUERY_HISTORY", "ORGANIZATION_USAGE"},
		{Snowflake, "SELECT * FROM SNOWFLAKE.READER_ACCOUNT_USAGE.QUERY_HISTORY", "READER_ACCOUNT_USAGE"},
		{Snowflake, "SELECT * FROM SNOWFLAKE.ACCOUNT_USAGE.WAREHOUSE_METERING_HISTORY", "the account's usage"},
		{Snowflake, "SELECT * FROM TABLE(INFORMATION_SCHEMA.QUERY_HISTORY())", "query history"},
		{Snowflake, "SELECT * FROM TABLE(information_schema.query_history_by_user(USER_NAME => 'bob'))", "query_history_by_user"},
		{Snowflake, "SELECT * FROM TABLE(mydb.INFORMATION_SCHEMA.QUERY_HISTORY_BY_SESSION())", "QUERY_HISTORY_BY_SESSION"},
		{Snowflake, "SELECT * FROM TABLE(QUERY_HISTORY_BY_WAREHOUSE())", "query history"},
		{Snowflake, "SELECT * FROM TABLE(INFORMATION_SCHEMA.LOGIN_HISTORY())", "LOGIN_HISTORY"},
		{Snowflake, "SELECT * FROM TABLE(INFORMATION_SCHEMA.TASK_HISTORY())", "TASK_HISTORY"},
		{Snowflake, "SELECT * FROM INFORMATION_SCHEMA.QUERY_HISTORY", "query history"},
		{Snowflake, "SELECT * FROM TABLE(RESULT_SCAN(LAST_QUERY_ID(-2)))", "the session's earlier queries"},
		{Snowflake, "SELECT * FROM TABLE(result_scan('01a2b3c4-0000-1111-0000-000000000001'))", "result_scan"},
		{Snowflake, "SELECT * FROM IDENTIFIER('SNOWFLAKE.ACCOUNT_USAGE.QUERY_HISTORY')", "the account's usage"},
		{Snowflake, `SELECT * FROM TABLE('"SNOWFLAKE"."ACCOUNT_USAGE"."QUERY_HISTORY"')`, "the account's usage"},
		{Snowflake, "WITH q AS (SELECT * FROM snowflake.account_usage.query_history) SELECT * FROM q", "query_history"},
		{Snowflake, "SELECT (SELECT MAX(query_text) FROM SNOWFLAKE.ACCOUNT_USAGE.QUERY_HISTORY) AS x", "ACCOUNT_USAGE"},
		{BigQuery, "SELECT query FROM `region-us`.INFORMATION_SCHEMA.JOBS", "the project's job history"},
		{BigQuery, "SELECT query FROM `region-us.INFORMATION_SCHEMA.JOBS_BY_USER`", "JOBS_BY_USER"},
		{BigQuery, "SELECT query FROM region-us.INFORMATION_SCHEMA.JOBS_BY_PROJECT", "JOBS_BY_PROJECT"},
		{BigQuery, "SELECT query FROM `my-project`.`region-eu`.INFORMATION_SCHEMA.JOBS_BY_ORGANIZATION", "JOBS_BY_ORGANIZATION"},
		{BigQuery, "SELECT * FROM `region-us`.information_schema.`jobs_timeline_by_user`", "jobs_timeline_by_user"},
		{BigQuery, "SELECT * FROM `region-us.INFORMATION_SCHEMA`.JOBS_BY_FOLDER", "JOBS_BY_FOLDER"},
		{BigQuery, "DECLARE x INT64 DEFAULT 1;\nSELECT query FROM `region-us`.INFORMATION_SCHEMA.JOBS", "JOBS"},
	}
	for _, tt := range tests {
		v := Classify(tt.sql, tt.d)
		if v.Allowed || !strings.Contains(v.Reason, tt.want) || !strings.Contains(v.Reason, "unless the operator allows them") {
			t.Errorf("%s: Classify(%q) = allowed %v, %q; want refused naming %q", tt.d, tt.sql, v.Allowed, v.Reason, tt.want)
		}
		if v := (Policy{AllowHistory: true}).Classify(tt.sql, tt.d); !v.Allowed {
			t.Errorf("%s: with AllowHistory, Classify(%q) refused: %s", tt.d, tt.sql, v.Reason)
		}
	}
}

// TestClassifyAdmitsHistoryLookalikes: names that only look like the
// history (in strings and comments, user tables of the same name, other
// schemas) are admitted under the strict policy; SHOW and the flow
// operator stay refused even when history is allowed.
func TestClassifyAdmitsHistoryLookalikes(t *testing.T) {
	t.Parallel()
	admitted := []struct {
		d   Dialect
		sql string
	}{
		{Snowflake, "SELECT 'SNOWFLAKE.ACCOUNT_USAGE.QUERY_HISTORY' AS s"},
		{Snowflake, "SELECT 1 -- from snowflake.account_usage.query_history\n"},
		{Snowflake, "SELECT * FROM analytics.public.query_history"},
		{Snowflake, "SELECT query_history, account_usage FROM t"},
		{Snowflake, "SELECT t.account_usage FROM t"},
		{Snowflake, "SELECT * FROM INFORMATION_SCHEMA.TABLES"},
		{Snowflake, "SELECT * FROM IDENTIFIER('mydb.public.orders')"},
		{Snowflake, "SELECT a - >b FROM t"},
		{BigQuery, "SELECT * FROM `region-us`.INFORMATION_SCHEMA.TABLES"},
		{BigQuery, "SELECT jobs FROM `p.d.jobs`"},
		{BigQuery, "SELECT * FROM d.jobs_by_user"},
		{BigQuery, "SELECT 'region-us.INFORMATION_SCHEMA.JOBS' AS s"},
		{SQLite, "SELECT * FROM query_history JOIN jobs USING (id)"},
	}
	for _, tt := range admitted {
		if v := Classify(tt.sql, tt.d); !v.Allowed {
			t.Errorf("%s: Classify(%q) refused: %s", tt.d, tt.sql, v.Reason)
		}
	}
	refused := []struct {
		d         Dialect
		sql, want string
	}{
		{Snowflake, "SHOW USERS", "SHOW is not a read statement"},
		{Snowflake, "SHOW TERSE QUERIES", "SHOW"},
		{Snowflake, "SELECT 1 ->> SHOW USERS", "flow operator ->>"},
		{Snowflake, "SHOW WAREHOUSES ->> SELECT * FROM $1", "SHOW"},
		{Snowflake, "SELECT 1->>DELETE FROM t", "flow operator"},
	}
	for _, tt := range refused {
		for _, p := range []Policy{{}, {AllowHistory: true}} {
			if v := p.Classify(tt.sql, tt.d); v.Allowed || !strings.Contains(v.Reason, tt.want) {
				t.Errorf("%s, %+v: Classify(%q) = allowed %v, %q; want refused saying %q", tt.d, p, tt.sql, v.Allowed, v.Reason, tt.want)
			}
		}
	}
}
