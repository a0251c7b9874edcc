package schema

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Fingerprint returns "sha256:<hex>" over one cheap catalogue query whose
// answer changes when db's tables, columns, types or descriptions do:
//
//   - SQLite: every sqlite_master row (type, name, table, CREATE text).
//   - Snowflake: the count and HASH_AGG of INFORMATION_SCHEMA.COLUMNS
//     (name, position, type, nullability, comment) and of .TABLES (name,
//     type, comment), aggregated in the warehouse so that one row comes
//     back however large the catalogue. LAST_ALTERED is left out on
//     purpose: it also moves on every insert, which would throw the cache
//     away for data changes.
//   - BigQuery: per dataset, the count and BIT_XOR of FARM_FINGERPRINT over
//     COLUMNS joined with COLUMN_FIELD_PATHS (positions, nested types,
//     descriptions), in one query.
//
// Data changes do not move it: sample rows are refreshed by the cache's
// TTL, not by the fingerprint.
func Fingerprint(ctx context.Context, wh warehouse.Warehouse, db string) (string, error) {
	q, canonical, err := fingerprintSQL(wh.Dialect(), db)
	if err != nil {
		return "", err
	}
	res, err := wh.Query(ctx, q, warehouse.Limits{})
	if err != nil {
		return "", fmt.Errorf("schema fingerprint of %s: %w", db, err)
	}
	if res.Truncated {
		return "", fmt.Errorf("schema fingerprint of %s: catalogue result cut by %s", db, res.TruncatedBy)
	}
	h := sha256.New()
	// The database as resolved (shop and SHOP are one Snowflake database).
	fmt.Fprintf(h, "%s\x00%s\x00", wh.Dialect(), canonical)
	// Rows are hashed in a fixed order, so the engine's row order (UNION
	// ALL gives none) does not matter.
	rows := make([]string, len(res.Rows))
	for i, row := range res.Rows {
		var b strings.Builder
		for _, v := range row {
			// Kind and length first, so NULL and "" differ and no cell
			// can pass for two.
			fmt.Fprintf(&b, "%d:%d:%s", v.Kind, len(text(v)), text(v))
		}
		rows[i] = b.String()
	}
	sort.Strings(rows)
	for _, r := range rows {
		fmt.Fprintf(h, "%d:%s", len(r), r)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// fingerprintSQL returns the dialect's fingerprint query and the database
// name as resolved.
func fingerprintSQL(d warehouse.Dialect, db string) (sql, canonical string, err error) {
	switch d {
	case warehouse.SQLite:
		return "SELECT type, name, tbl_name, sql FROM sqlite_master", db, nil
	case warehouse.Snowflake:
		name, err := snowflakeName(db)
		if err != nil {
			return "", "", err
		}
		q := sfIdent(name)
		return "SELECT c.N AS COLUMNS_COUNT, c.H AS COLUMNS_HASH, t.N AS TABLES_COUNT, t.H AS TABLES_HASH FROM" +
			" (SELECT COUNT(*) AS N, HASH_AGG(TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, IS_NULLABLE, COMMENT) AS H" +
			" FROM " + q + ".INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA <> 'INFORMATION_SCHEMA') AS c," +
			" (SELECT COUNT(*) AS N, HASH_AGG(TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, COMMENT) AS H" +
			" FROM " + q + ".INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA <> 'INFORMATION_SCHEMA') AS t", name, nil
	case warehouse.BigQuery:
		sets, err := bqDatasets(db)
		if err != nil {
			return "", "", err
		}
		parts := make([]string, len(sets))
		names := make([]string, len(sets))
		for i, ds := range sets {
			r := ds.ref()
			names[i] = ds.String()
			// The dataset name is checked to hold no quote (bqDatasets).
			parts[i] = "SELECT '" + ds.String() + "' AS dataset, COUNT(*) AS n," +
				" BIT_XOR(FARM_FINGERPRINT(TO_JSON_STRING(STRUCT(c.table_name, c.column_name, c.ordinal_position, c.data_type, p.field_path, p.data_type AS field_type, p.description)))) AS h" +
				" FROM " + r + ".INFORMATION_SCHEMA.COLUMNS AS c JOIN " + r + ".INFORMATION_SCHEMA.COLUMN_FIELD_PATHS AS p USING (table_name, column_name)" +
				" WHERE c.is_hidden = 'NO'"
		}
		return strings.Join(parts, " UNION ALL "), strings.Join(names, ","), nil
	}
	return "", "", fmt.Errorf("schema fingerprint of %s: unsupported dialect %q", db, d)
}
