package dataset

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// MaxNameLength bounds instance ids, database names and document names.
const MaxNameLength = 128

// CheckName refuses a name read from a dataset that could be taken for a
// path: instance ids, databases and documents name output files, folders
// and documents, so they must be data, never paths. A name is letters,
// digits, '_', '-' and '.', not starting with '.', at most MaxNameLength
// bytes.
func CheckName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty")
	case len(s) > MaxNameLength:
		return fmt.Errorf("%d bytes, over the %d-byte limit", len(s), MaxNameLength)
	case s[0] == '.':
		return fmt.Errorf("starts with '.'")
	}
	for _, r := range s {
		ok := r == '_' || r == '-' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return fmt.Errorf("holds %q: use letters, digits, '_', '-' and '.'", r)
		}
	}
	return nil
}

// within resolves path (symlinks included) and checks that it stays under
// root, resolved the same way.
func within(root, path string) (string, error) {
	r, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(r, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(os.PathSeparator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("resolves to %s, outside %s", p, r)
	}
	return p, nil
}
