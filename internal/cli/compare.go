package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/internal/app/compare"
)

func newCompareCmd() *cobra.Command {
	var all, asJSON, failOnChange bool
	var htmlPath string
	cmd := &cobra.Command{
		Use:   "compare BASE OTHER [OTHER...]",
		Short: "Compare runs of one dataset example by example: answers changed, right→wrong and wrong→right, calls, tokens, money, latency",
		Long: `compare sets each OTHER run against the BASE run, example by example, for
ablations, agent comparisons and adaptive against fixed sampling. Each
argument is a run's output folder (--out of quorum run, solve or bench), or
its run.json; only the folder is read.

For the examples both runs hold it says how many answers changed (the
status, or the result table of an answered example), how many more have
other SQL with the same result, which went right→wrong and wrong→right where
gold judged both runs, and what each run spent: LLM calls, prompt and
completion tokens, money, latency p50 and p95. Then one line per example
that changed (--all: every example). Examples in one run only are listed.
--html FILE writes the same as a page, each changed example linked to both
runs' trace pages.

Exit status: 0 when compared; 1 with --fail-on-change when any answer
changed; 2 on bad input (a folder without run.json, runs with no example in
common).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usage(errors.New("name two runs or more: quorum compare BASE OTHER [OTHER...] (each a run's --out folder)"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			runs := make([]*compare.Run, len(args))
			for i, dir := range args {
				r, err := compare.Load(dir)
				if err != nil {
					return usage(err)
				}
				runs[i] = r
			}
			var diffs []*compare.Diff
			changed := 0
			for _, other := range runs[1:] {
				d, err := compare.Compare(runs[0], other)
				if err != nil {
					return usage(err)
				}
				diffs = append(diffs, d)
				changed += d.Changed
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				if err := enc.Encode(diffs); err != nil {
					return err
				}
			} else {
				for i, d := range diffs {
					if i > 0 {
						fmt.Fprintln(w)
					}
					if err := d.WriteText(w, all); err != nil {
						return err
					}
				}
			}
			if htmlPath != "" {
				if err := writeComparePage(htmlPath, diffs, all); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", htmlPath)
			}
			if failOnChange && changed > 0 {
				return &exitError{code: 1, msg: fmt.Sprintf("%d answers changed against the base run %s", changed, runs[0].Name())}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&all, "all", false, "list every example, not only those that changed")
	fl.BoolVar(&asJSON, "json", false, "print the comparisons as JSON (one object per OTHER run, every example in it)")
	fl.BoolVar(&failOnChange, "fail-on-change", false, "exit 1 when any answer changed (a regression check)")
	fl.StringVar(&htmlPath, "html", "", "also write the comparison as a page to this file, each changed example linked to both runs' trace pages")
	return cmd
}

// writeComparePage writes the comparison page to path, whole or not at all.
func writeComparePage(path string, diffs []*compare.Diff, all bool) error {
	var b bytes.Buffer
	if err := compare.WriteHTML(&b, filepath.Dir(path), diffs, all); err != nil {
		return fmt.Errorf("--html %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--html %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("--html %s: %w", path, err)
	}
	return nil
}
