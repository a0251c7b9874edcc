package eval

import (
	"fmt"
	"github.com/quorumsql/quorum/pkg/dataset"
)

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
func ScoreAgainstGold(pred *Frame, resultDir, id string, spec dataset.Spec) (bool, error) {
	return ScoreAgainstGoldLimited(pred, resultDir, id, spec, Limits{})
}

// ScoreAgainstGoldLimited is ScoreAgainstGold within lim.
func ScoreAgainstGoldLimited(pred *Frame, resultDir, id string, spec dataset.Spec, lim Limits) (bool, error) {
	files, single, err := dataset.GoldFiles(resultDir, id)
	if err != nil {
		return false, err
	}
	return scoreAgainstFiles(pred, files, single, spec, lim)
}

// scoreAgainstFiles scores pred against the gold files of one example.
func scoreAgainstFiles(pred *Frame, files []string, single bool, spec dataset.Spec, lim Limits) (bool, error) {
	var err error
	golds := make([]*Frame, len(files))
	for i, f := range files {
		if golds[i], err = ReadCSVFileLimited(f, lim); err != nil {
			return false, fmt.Errorf("gold %w", err)
		}
	}
	return CompareGoldLimited(pred, golds, single, spec.ConditionCols, spec.IgnoreOrder, lim)
}
