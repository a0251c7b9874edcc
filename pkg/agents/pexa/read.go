package pexa

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/quorumsql/quorum/pkg/reply"
)

// Every tool call's arguments and every reply are read through pkg/reply,
// leniently: real models write `sql` for `sql_query`, "false" for false,
// one object where a list was asked for, extra keys, and fences around a
// query in a string. What cannot be read is answered with a message that
// says exactly what was wrong, and counted in cost.Cost.FormatReasks.

// Alternative key names models use for the schema's.
var (
	sqlKeys       = []string{"sql_query", "sql", "query", "sqlquery"}
	queriesKeys   = []string{"queries", "sql_queries", "sqls"}
	exploreKeys   = []string{"exploration", "is_exploration", "exploratory", "explore"}
	promisingKeys = []string{"most_promising", "final", "is_final", "promising"}
	probeKeys     = []string{"probe", "question", "text", "description"}
)

// toolName is a call's name as the agent knows it: models write
// "functions.execute_sql" or "Execute_SQL" as well.
func toolName(name string) string {
	name = strings.TrimSpace(name)
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return strings.ToLower(name)
}

// sqlText is a query as written in an argument, a fence around it removed.
func sqlText(s string) string {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "```") {
		if q, err := reply.SQL(s, ""); err == nil {
			return q
		}
	}
	return s
}

// sqlArg reads the sql_query of an execute_sql, semantic_verifier or
// no-proposer finish call.
func sqlArg(args string) (string, error) {
	f, err := reply.Args(args)
	if err != nil {
		return "", fmt.Errorf("the arguments could not be read (%w)", err)
	}
	s, ok := f.String(sqlKeys...)
	if s = sqlText(s); !ok || s == "" {
		return "", errors.New("the arguments have no sql_query")
	}
	return s, nil
}

// sqlArgsResult is the tool result for an unreadable sql_query argument.
func sqlArgsResult(err error) string {
	return fmt.Sprintf(`The arguments were not understood: %v. Give {"sql_query": "..."}.`, err)
}

// query is one query of an execute_sql batch as read; Problem says why it
// is not run.
type query struct {
	Description, SQL       string
	Exploration, Promising bool
	Problem                string
}

// errQueriesForm is the form execute_sql's arguments must take.
const errQueriesForm = `give {"queries": [{"description": "...", "sql_query": "...", "exploration": false}]}`

// readQueries reads an execute_sql batch, capped to maxSQLs (0 = no cap,
// D-P15). A query whose SQL or exploration flag cannot be read is kept
// with its Problem, so the feedback can number the batch as the model
// wrote it; an unreadable most_promising (not asked for, but read when a
// model writes it) is read as not marked (it only ranks the fallback,
// D-P24).
func readQueries(args string, maxSQLs int) ([]query, error) {
	f, err := reply.Args(args)
	if err != nil {
		return nil, fmt.Errorf("could not be read (%w)", err)
	}
	list, ok := f.List(queriesKeys...)
	if !ok {
		if _, one := f.String(sqlKeys...); !one {
			return nil, errors.New(`have no "queries" list`)
		}
		list = []reply.Fields{f} // one query without its list
	}
	if len(list) == 0 {
		return nil, errors.New(`have an empty "queries" list`)
	}
	if maxSQLs > 0 && len(list) > maxSQLs {
		list = list[:maxSQLs]
	}
	out := make([]query, len(list))
	for i, q := range list {
		d, _ := q.String("description", "desc")
		s, _ := q.String(sqlKeys...)
		r := query{Description: d, SQL: sqlText(s)}
		var e error
		r.Exploration, _, e = q.Bool(exploreKeys...)
		switch {
		case r.SQL == "":
			r.Problem = "the query has no sql_query"
		case e != nil:
			r.Problem = fmt.Sprintf("its exploration flag could not be read (%v); give true or false", e)
		}
		r.Promising, _, _ = q.Bool(promisingKeys...)
		out[i] = r
	}
	return out, nil
}

// readProbes reads generate_testcase's probes: a list of strings, of
// objects holding the probe, one string, or the list as a JSON string.
func readProbes(args string) ([]string, error) {
	f, err := reply.Args(args)
	if err != nil {
		return nil, fmt.Errorf("could not be read (%w)", err)
	}
	v, ok := field(f, "probes", "probe", "test_cases", "testcases", "questions")
	if !ok {
		return nil, errors.New(`have no "probes" list`)
	}
	if s, isText := v.(string); isText {
		var list []any
		if json.Unmarshal([]byte(reply.Repair(s)), &list) == nil {
			v = list
		} else {
			v = []any{s}
		}
	}
	if m, isObj := v.(map[string]any); isObj {
		v = []any{m}
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf(`have "probes" as %T, not a list of strings`, v)
	}
	var out []string
	for i, it := range items {
		var p string
		switch x := it.(type) {
		case string:
			p = x
		case map[string]any:
			p, _ = reply.Fields(x).String(probeKeys...)
		}
		if p = strings.TrimSpace(p); p == "" {
			return nil, fmt.Errorf("have probe %d that is not a text", i+1)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New(`have an empty "probes" list`)
	}
	return out, nil
}

// field is the first of keys present in f, any letter case.
func field(f reply.Fields, keys ...string) (any, bool) {
	for _, k := range keys {
		for name, v := range f {
			if strings.EqualFold(name, k) && v != nil {
				return v, true
			}
		}
	}
	return nil, false
}
