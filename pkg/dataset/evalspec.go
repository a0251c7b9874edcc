package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Spider 2.0's gold formats: the eval config (*_eval.jsonl) and the layout
// of the gold result files. They are read here, with the rest of a dataset;
// package eval compares results by them.

// Spec is one line of a Spider 2.0 *_eval.jsonl file.
type Spec struct {
	InstanceID    string     `json:"instance_id"`
	ConditionCols Conditions `json:"condition_cols"`
	IgnoreOrder   bool       `json:"ignore_order"`
}

// LoadSpecs reads an *_eval.jsonl file. Errors name the file and line.
func LoadSpecs(path string) (map[string]Spec, error) {
	data, err := readInside(filepath.Dir(path), path, MaxGoldCSVBytes, "eval config")
	if err != nil {
		return nil, err
	}
	out := make(map[string]Spec)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var s Spec
		if err := json.Unmarshal([]byte(text), &s); err != nil {
			return nil, fmt.Errorf("%s:%d: malformed JSON line: %w", path, line, err)
		}
		if s.InstanceID == "" {
			return nil, fmt.Errorf("%s:%d: no instance_id", path, line)
		}
		out[s.InstanceID] = s
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}

// FindSpecFile returns the single *_eval.jsonl in dir.
func FindSpecFile(dir string) (string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "*_eval.jsonl"))
	if err != nil {
		return "", err
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("gold folder %s has no *_eval.jsonl (it should hold one eval config and exec_result/)", dir)
	case 1:
		return matches[0], nil
	}
	return "", fmt.Errorf("gold folder %s has %d *_eval.jsonl files (%s); keep one", dir, len(matches), strings.Join(matches, ", "))
}

var variantName = regexp.MustCompile(`^(.+?)(_[a-z])?\.csv$`)

// GoldFiles returns the gold result files of id in resultDir: the base file
// <id>.csv alone if it exists (single mode), otherwise every <id>_x.csv
// variant in name order.
// Scoring many examples, list the folder once with NewGoldIndex.
func GoldFiles(resultDir, id string) (files []string, single bool, err error) {
	base := filepath.Join(resultDir, id+".csv")
	if _, err := os.Stat(base); err == nil {
		return []string{base}, true, nil
	}
	return NewGoldIndex(resultDir).Files(id)
}

// GoldIndex is a gold result folder listed once: every id's variant files.
// Listing the folder for each example made loading (and scoring) N
// examples cost N listings of N files.
type GoldIndex struct {
	dir      string
	variants map[string][]string
	// err is why the folder could not be listed.
	err error
}

// NewGoldIndex lists resultDir; a folder that cannot be listed makes
// Files fail for ids without a single gold file, as GoldFiles does.
func NewGoldIndex(resultDir string) *GoldIndex {
	idx := &GoldIndex{dir: resultDir, variants: map[string][]string{}}
	entries, err := os.ReadDir(resultDir)
	if err != nil {
		idx.err = fmt.Errorf("gold results: %w", err)
		return idx
	}
	for _, e := range entries {
		if m := variantName.FindStringSubmatch(e.Name()); m != nil && m[2] != "" {
			idx.variants[m[1]] = append(idx.variants[m[1]], filepath.Join(resultDir, e.Name()))
		}
	}
	for _, files := range idx.variants {
		sort.Strings(files)
	}
	return idx
}

// Files is GoldFiles(resultDir, id) from the listing.
func (idx *GoldIndex) Files(id string) ([]string, bool, error) {
	base := filepath.Join(idx.dir, id+".csv")
	if _, err := os.Stat(base); err == nil {
		return []string{base}, true, nil
	}
	if idx.err != nil {
		return nil, false, idx.err
	}
	files := idx.variants[id]
	if len(files) == 0 {
		return nil, false, fmt.Errorf("no gold result for %s in %s (expected %s.csv or %s_a.csv, ...)", id, idx.dir, id, id)
	}
	return slices.Clone(files), false, nil
}

// Conditions is the raw condition_cols value of an eval config line: null,
// an int, a flat list of ints, or a list of lists (one per gold variant).
type Conditions struct {
	raw json.RawMessage
}

// UnmarshalJSON keeps the raw value; its meaning depends on the number of
// gold variants.
func (c *Conditions) UnmarshalJSON(b []byte) error {
	c.raw = append(json.RawMessage(nil), b...)
	return nil
}

// MarshalJSON writes the raw value back.
func (c Conditions) MarshalJSON() ([]byte, error) {
	if len(c.raw) == 0 {
		return []byte("null"), nil
	}
	return c.raw, nil
}

// Raw is the value as written (empty when absent).
func (c Conditions) Raw() json.RawMessage { return c.raw }

// ConditionsOf builds Conditions from a Go value (for generated eval files).
func ConditionsOf(v any) Conditions {
	b, _ := json.Marshal(v)
	return Conditions{raw: b}
}
