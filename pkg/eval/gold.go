package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Spec is one line of a Spider 2.0 *_eval.jsonl file.
type Spec struct {
	InstanceID    string     `json:"instance_id"`
	ConditionCols Conditions `json:"condition_cols"`
	IgnoreOrder   bool       `json:"ignore_order"`
}

// LoadSpecs reads an *_eval.jsonl file. Errors name the file and line.
func LoadSpecs(path string) (map[string]Spec, error) {
	data, err := readBounded(path, DefaultMaxBytes, errors.New("eval config too large"))
	if err != nil {
		return nil, fmt.Errorf("eval config: %w", err)
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
func GoldFiles(resultDir, id string) (files []string, single bool, err error) {
	base := filepath.Join(resultDir, id+".csv")
	if _, err := os.Stat(base); err == nil {
		return []string{base}, true, nil
	}
	entries, err := os.ReadDir(resultDir)
	if err != nil {
		return nil, false, fmt.Errorf("gold results: %w", err)
	}
	for _, e := range entries {
		m := variantName.FindStringSubmatch(e.Name())
		if m != nil && m[1] == id && m[2] != "" {
			files = append(files, filepath.Join(resultDir, e.Name()))
		}
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, false, fmt.Errorf("no gold result for %s in %s (expected %s.csv or %s_a.csv, ...)", id, resultDir, id, id)
	}
	return files, false, nil
}

// ReadCSVFile reads one CSV file with the pandas rules, within the default
// Limits.
func ReadCSVFile(path string) (*Frame, error) {
	return ReadCSVFileLimited(path, Limits{})
}

// ReadCSVFileLimited reads one CSV file within lim; a file larger than
// lim.MaxBytes is refused before it is read. Errors name the file.
func ReadCSVFileLimited(path string, lim Limits) (*Frame, error) {
	lim = lim.withDefaults()
	data, err := readBounded(path, lim.MaxBytes, ErrTooLarge)
	if err != nil {
		return nil, err
	}
	f, err := readCSVText(string(data), lim)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// ScoreAgainstGold scores one predicted table against id's gold files,
// within the default Limits.
func ScoreAgainstGold(pred *Frame, resultDir, id string, spec Spec) (bool, error) {
	return ScoreAgainstGoldLimited(pred, resultDir, id, spec, Limits{})
}

// ScoreAgainstGoldLimited is ScoreAgainstGold within lim.
func ScoreAgainstGoldLimited(pred *Frame, resultDir, id string, spec Spec, lim Limits) (bool, error) {
	files, single, err := GoldFiles(resultDir, id)
	if err != nil {
		return false, err
	}
	golds := make([]*Frame, len(files))
	for i, f := range files {
		if golds[i], err = ReadCSVFileLimited(f, lim); err != nil {
			return false, fmt.Errorf("gold %w", err)
		}
	}
	return CompareGoldLimited(pred, golds, single, spec.ConditionCols, spec.IgnoreOrder, lim)
}
