package dataset

import "fmt"

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
