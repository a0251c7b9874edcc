package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

// TestHostileValuesFailInsideTheEngine: one huge value, built in a single
// step where no row cap or interrupt reaches, fails at once with the
// engine's "too big" as a query error the model can read; ordinary values
// are untouched.
func TestHostileValuesFailInsideTheEngine(t *testing.T) {
	t.Parallel()
	db, err := Open(Config{Path: filepath.Join("..", "..", "..", "examples", "demo", "resource", "databases", "spider2-localdb", "shop.sqlite")})
	if err != nil {
		t.Skipf("demo database: %v", err)
	}
	defer db.Close()
	ctx := context.Background()
	for _, q := range []string{
		"SELECT zeroblob(1000000000)",
		"SELECT length(hex(randomblob(400000000)))",
		"SELECT length(replace(hex(zeroblob(100000000)), '0', 'xx'))",
	} {
		_, err := db.Query(ctx, q, warehouse.Limits{MaxRows: 10, MaxBytes: 1 << 20})
		var qe *warehouse.QueryError
		if !errors.As(err, &qe) || !strings.Contains(qe.Message, "too big") {
			t.Errorf("%s: %v, want a query error saying the value is too big", q, err)
		}
	}
	res, err := db.Query(ctx, "SELECT length(randomblob(1000)) AS n", warehouse.Limits{MaxRows: 10, MaxBytes: 1 << 20})
	if err != nil || res.RowCount() != 1 {
		t.Errorf("an ordinary value: %v", err)
	}
}
