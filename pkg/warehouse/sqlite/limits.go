package sqlite

import (
	"database/sql"
	"fmt"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// likePatternLength bounds a LIKE or GLOB pattern (SQLite's default is
// 50000 bytes). The replacement LIKE stops when interrupted whatever the
// pattern, so this only keeps patterns to what a question needs.
const likePatternLength = 10000

// connLimit is one sqlite3_limit setting.
type connLimit struct {
	id, value int
	what      string
}

// connLimits are the sqlite3_limit values every query runs under, beyond
// SQLITE_LIMIT_LENGTH (set per query from its byte cap). Each bounds an
// amplifier that real questions do not need; the driver's compiled-in
// maxima are in the comments.
func connLimits() []connLimit {
	return []connLimit{
		// 1 MiB of SQL (1e9): bounds the program, and so how many calls one
		// row can make between two interrupt checks.
		{sqlite3.SQLITE_LIMIT_SQL_LENGTH, 1 << 20, "SQL length"},
		// Expression nesting (1000): parse-time recursion and straight-line
		// work per row; 500 is far above a generated condition chain.
		{sqlite3.SQLITE_LIMIT_EXPR_DEPTH, 500, "expression depth"},
		// SELECTs in one compound (500).
		{sqlite3.SQLITE_LIMIT_COMPOUND_SELECT, 200, "compound select terms"},
		// Arguments of one call (1000): json_set(j, 500 paths) rewrites a
		// 16 MiB value 500 times in one step; 127 was SQLite's old default.
		{sqlite3.SQLITE_LIMIT_FUNCTION_ARG, 127, "function arguments"},
		{sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, likePatternLength, "LIKE pattern length"},
		// ATTACH is refused by the authorizer as well.
		{sqlite3.SQLITE_LIMIT_ATTACHED, 0, "attached databases"},
	}
}

// setLimits applies connLimits and the value-size cap to conn; limits are
// per connection, so every query sets them (each call is a few ns).
func setLimits(conn *sql.Conn, maxValue int) error {
	if _, err := msqlite.Limit(conn, sqlite3.SQLITE_LIMIT_LENGTH, maxValue); err != nil {
		return fmt.Errorf("limit value size to %d: %w", maxValue, err)
	}
	for _, l := range connLimits() {
		if _, err := msqlite.Limit(conn, l.id, l.value); err != nil {
			return fmt.Errorf("limit %s to %d: %w", l.what, l.value, err)
		}
	}
	return nil
}
