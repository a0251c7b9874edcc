package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/pkg/sqltext"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// checkSQLLine is one line of quorum check-sql's output.
type checkSQLLine struct {
	File    string `json:"file"`
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason"`
}

func newCheckSQLCmd() *cobra.Command {
	var dialect string
	cmd := &cobra.Command{
		Use:   "check-sql --dialect sqlite|snowflake|bigquery FILE...",
		Short: "Say whether SQL files pass quorum's read-only guard",
		Long: `check-sql runs each FILE through the read-only statement classifier every
warehouse query passes before it reaches the engine, and prints one JSON
line per file: {"file": FILE, "allowed": true|false, "reason": "..."}.

The classifier tokenizes the text with the dialect's quotes and comments
(SQLite [ident] and backquotes; Snowflake // comments and $$ strings;
BigQuery triple-quoted and r/b strings, # comments) and admits exactly one
SELECT, WITH or VALUES query (a trailing ';' and comments allowed), or in
BigQuery a script of only DECLARE, SET of a variable, CREATE TEMP FUNCTION
and SELECT/WITH statements. It refuses any other statement, a second
statement, a WITH whose final statement is not a query, and calls of
functions with side effects (SQLite load_extension, writefile, readfile;
Snowflake SYSTEM$ control functions; BigQuery EXTERNAL_QUERY; EXECUTE
IMMEDIATE).

FILE "-" reads standard input. Exit status: 0 when every file is allowed, 1
when any is refused, 2 on usage errors (unknown dialect, no files, a file
that cannot be read).`,
		RunE: func(cmd *cobra.Command, files []string) error {
			if dialect == "" {
				return usage(errors.New("--dialect is required: sqlite, snowflake or bigquery"))
			}
			d, err := warehouse.ParseDialect(dialect)
			if err != nil {
				return usage(fmt.Errorf("--dialect: %w", err))
			}
			if len(files) == 0 {
				return usage(errors.New("no SQL files given: name one or more, as in quorum check-sql --dialect DIALECT FILE"))
			}
			texts := make([]string, len(files))
			var unreadable []string
			for i, f := range files {
				var b []byte
				var err error
				if f == "-" {
					b, err = io.ReadAll(cmd.InOrStdin())
				} else {
					b, err = os.ReadFile(f)
				}
				if err != nil {
					unreadable = append(unreadable, err.Error())
					continue
				}
				texts[i] = string(b)
			}
			if len(unreadable) > 0 {
				return usage(fmt.Errorf("cannot read %s", strings.Join(unreadable, "; ")))
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetEscapeHTML(false)
			refused := 0
			for i, f := range files {
				v := sqltext.Classify(texts[i], d)
				if !v.Allowed {
					refused++
				}
				if err := enc.Encode(checkSQLLine{File: f, Allowed: v.Allowed, Reason: v.Reason}); err != nil {
					return err
				}
			}
			if refused > 0 {
				return &exitError{code: 1, msg: fmt.Sprintf("%d of %d files refused", refused, len(files))}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dialect, "dialect", "", "SQL dialect of the files: sqlite, snowflake or bigquery")
	return cmd
}
