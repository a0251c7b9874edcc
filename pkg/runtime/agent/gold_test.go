package agent_test

import (
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

func TestGoldAblation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts map[string]string
		want bool
	}{
		{"none", nil, false},
		{"gold tables", map[string]string{"gold-tables": "true"}, true},
		{"gold schema as 1", map[string]string{"gold-schema": "1", "no-vote": "true"}, true},
		{"off", map[string]string{"gold-tables": "false", "gold-schema": "false"}, false},
		{"not a bool", map[string]string{"gold-tables": "maybe"}, false},
		{"a member's", map[string]string{"members": "reforce,pexa", "reforce.gold-tables": "true"}, true},
		{"a member's, off", map[string]string{"reforce.gold-schema": "false", "pexa.passes": "2"}, false},
		{"a name that only contains it", map[string]string{"gold-tables-extra": "true", "no-gold-tables": "true"}, false},
	} {
		if got := agent.GoldAblation(tc.opts); got != tc.want {
			t.Errorf("%s: GoldAblation(%v) = %v, want %v", tc.name, tc.opts, got, tc.want)
		}
	}
}

// TestGoldAblationOverTheShippedAgents: no shipped agent sees gold with
// its default options; ReFoRCE's two ablations, alone or as an ensemble
// member, are what turn it on.
func TestGoldAblationOverTheShippedAgents(t *testing.T) {
	t.Parallel()
	reg := agents.Builtin()
	for _, name := range reg.Names() {
		def, err := reg.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		opts, err := def.CheckOptions(nil)
		if err != nil {
			t.Fatal(err)
		}
		if agent.GoldAblation(opts) {
			t.Errorf("agent %s sees gold with its default options %v", name, opts)
		}
	}
	for _, tc := range []struct{ agent, option string }{
		{"reforce", "gold-tables"}, {"reforce", "gold-schema"},
		{"ensemble", "reforce.gold-tables"}, {"ensemble", "reforce.gold-schema"},
	} {
		def, _ := reg.Lookup(tc.agent)
		opts, err := def.CheckOptions(map[string]string{tc.option: "true"})
		if err != nil {
			t.Fatalf("%s %s: %v", tc.agent, tc.option, err)
		}
		if !agent.GoldAblation(opts) {
			t.Errorf("%s with %s=true: no gold ablation", tc.agent, tc.option)
		}
	}
}

// TestGoldIdentifiersReadAsTheGoldSQL: ReFoRCE's ablation reads the
// joined identifiers exactly as it reads the gold SQL itself, so passing
// them instead of the SQL changes nothing it restricts.
func TestGoldIdentifiersReadAsTheGoldSQL(t *testing.T) {
	t.Parallel()
	for _, sql := range []string{
		"SELECT COUNT(*) AS customer_count FROM customers",
		"SELECT a.Name, b.total FROM \"SCHEMA\".\"ORDERS\" a JOIN orders b ON a.id = b.id WHERE a.name = 'Smith'",
		"SELECT fullVisitorId FROM `bigquery-public-data.google_analytics_sample.ga_sessions_*` WHERE _TABLE_SUFFIX BETWEEN '20170101' AND '20170131'",
		"select x$1, X$1 from T_1 union all select x$1, y from t_1",
		"",
	} {
		ids := agent.GoldIdentifiers(sql)
		if !sort.StringsAreSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
			t.Errorf("%q: identifiers %v are not sorted and distinct", sql, ids)
		}
		got, want := dbinfo.GoldReferences(strings.Join(ids, " ")), dbinfo.GoldReferences(sql)
		if !reflect.DeepEqual(got.Words, want.Words) || !reflect.DeepEqual(set(got.Prefixes), set(want.Prefixes)) {
			t.Errorf("%q: the identifiers %v read as %+v, the SQL as %+v", sql, ids, got, want)
		}
	}
}

func set(xs []string) map[string]bool {
	out := map[string]bool{}
	for _, x := range xs {
		out[x] = true
	}
	return out
}

// TestViewHidesGold: the context an agent gets has no gold by any path
// (its example, the dataset's examples and gold folder, the warehouses'
// dataset), the gold identifiers only under a gold ablation, and the
// runtime's dataset keeps its gold.
func TestViewHidesGold(t *testing.T) {
	t.Parallel()
	demo := agenttest.Demo(t)
	ds, whs, pools := demo.Dataset, demo.Warehouses, demo.Warehouses.SQLite
	e, ok := ds.Example("local001")
	if !ok || e.Gold.SQL == "" || len(e.Gold.Results) == 0 || ds.GoldDir == "" {
		t.Fatalf("demo local001: found %v, gold %+v, gold dir %q: the test would prove nothing", ok, e.Gold, ds.GoldDir)
	}
	goldSQL := e.Gold.SQL
	for _, tc := range []struct {
		name    string
		opts    map[string]string
		whs     *localdb.Warehouses
		wantIDs []string
	}{
		{"no ablation", map[string]string{"no-vote": "true"}, whs, nil},
		{"gold tables", map[string]string{"gold-tables": "true"}, whs, agent.GoldIdentifiers(goldSQL)},
		{"no warehouses", nil, nil, nil},
	} {
		c := agent.NewView(ds, tc.whs, tc.opts).Context(e)
		if !reflect.DeepEqual(c.Example.Gold, dataset.Gold{}) {
			t.Errorf("%s: the context's example has gold %+v", tc.name, c.Example.Gold)
		}
		if c.Example.ID != e.ID || c.Example.Question != e.Question || c.Example.DB != e.DB {
			t.Errorf("%s: the context's example is %+v, want %s's", tc.name, c.Example, e.ID)
		}
		if c.Dataset == ds || c.Dataset.GoldDir != "" || c.Dataset.TaskFile != "" {
			t.Errorf("%s: the context's dataset is the run's (%v), or has gold dir %q, task file %q", tc.name, c.Dataset == ds, c.Dataset.GoldDir, c.Dataset.TaskFile)
		}
		for _, x := range c.Dataset.Examples {
			if !reflect.DeepEqual(x.Gold, dataset.Gold{}) {
				t.Errorf("%s: the context's dataset holds example %s with gold", tc.name, x.ID)
			}
		}
		switch {
		case tc.whs == nil && c.Schema != nil:
			t.Errorf("%s: warehouses %v, want none", tc.name, c.Schema)
		case tc.whs != nil && (c.Schema == nil || c.Schema.DS != c.Dataset || c.Schema.SQLite != pools):
			t.Errorf("%s: the context's warehouses are not over its dataset and the run's pools: %+v", tc.name, c.Schema)
		}
		if !slices.Equal(c.GoldIdentifiers, tc.wantIDs) || (tc.wantIDs != nil) != (c.GoldIdentifiers != nil) {
			t.Errorf("%s: gold identifiers %v, want %v", tc.name, c.GoldIdentifiers, tc.wantIDs)
		}
	}
	if e.Gold.SQL != goldSQL || ds.GoldDir == "" || whs.DS != ds {
		t.Errorf("the run's dataset lost its gold: SQL %q, gold dir %q", e.Gold.SQL, ds.GoldDir)
	}
}
