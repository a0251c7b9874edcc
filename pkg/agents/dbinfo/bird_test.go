package dbinfo

import (
	"context"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

const birdMiniDir = "../../../examples/bird-mini"

// TestFromSQLiteWithBirdDescriptions: BIRD's column documentation reaches
// the live-SQLite prompt, and is left out without it.
func TestFromSQLiteWithBirdDescriptions(t *testing.T) {
	t.Parallel()
	ds, err := dataset.Load(birdMiniDir, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := ds.Example("dev_0")
	db, _ := ds.Database(e)
	if db.Descriptions == nil {
		t.Fatal("the fixture has no descriptions")
	}
	wh, err := sqlite.Open(sqlite.Config{Path: db.SQLitePath})
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()

	plain, err := FromSQLite(context.Background(), wh, db.Name, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.Tables, "Description:") {
		t.Errorf("descriptions without documentation:\n%.400s", plain.Tables)
	}

	info, err := FromSQLite(context.Background(), wh, db.Name, DefaultOptions(), db.Descriptions)
	if err != nil {
		t.Fatal(err)
	}
	col := func(table, name string) Column {
		for _, b := range info.Blocks {
			if b.Name == table {
				for _, c := range b.Columns {
					if c.Name == name {
						return c
					}
				}
			}
		}
		t.Fatalf("no column %s.%s", table, name)
		return Column{}
	}
	tests := []struct{ table, column, want string }{
		{"customers", "loyalty_tier", "the customer's tier in the loyalty programme. Value description: bronze < silver < gold < platinum"},
		{"categories", "name", "nom de la catégorie"},
		{"orders", "currency", "Value description: USD or EUR (€)"},
		{"order_items", "order_item_id", "the unique id of the order line"},
		{"customers", "phone", ""},
	}
	for _, tt := range tests {
		if got := col(tt.table, tt.column).Description; got != tt.want {
			t.Errorf("%s.%s description %q, want %q", tt.table, tt.column, got, tt.want)
		}
	}
	if !strings.Contains(info.Tables, "Column name: loyalty_tier Type: TEXT Description: the customer's tier in the loyalty programme. Value description: bronze < silver < gold < platinum\n") {
		t.Errorf("prompt:\n%.1500s", info.Tables)
	}

	// ForExample passes the dataset's descriptions on.
	set := &sqlite.Set{}
	defer set.Close()
	viaDS, err := ForExample(context.Background(), ds, e, &localdb.Warehouses{DS: ds, SQLite: set}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(viaDS.Tables, "Column name: currency Type: TEXT Description: Value description: USD or EUR (€)\n") {
		t.Errorf("ForExample prompt:\n%.1500s", viaDS.Tables)
	}
}
