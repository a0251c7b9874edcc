package eval

import (
	"errors"
	"fmt"
	"github.com/quorumsql/quorum/pkg/dataset"
	"io"
	"os"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Limits bound what the evaluator reads and compares, so that a hostile
// prediction or gold file costs bounded memory and time instead of
// exhausting the process. A zero field takes its default; a negative field
// means no limit. Inputs beyond a limit fail with ErrTooLarge, which scores
// the instance 0 like any other error.
type Limits struct {
	// MaxBytes bounds one CSV: a gold or predicted file, or a query result
	// rendered to CSV. Default DefaultMaxBytes.
	MaxBytes int64
	// MaxCells bounds one table: the fields its CSV holds (header
	// included) and the cells pandas makes of them, columns × rows, short
	// rows padded. The padding is why it is needed beside MaxBytes: a wide
	// header over many one-field rows turns 1.5 MB of CSV into 10^11 cells.
	// A cell costs about 100 bytes at its peak while read and compared.
	// Default DefaultMaxCells.
	MaxCells int
	// MaxCompare bounds the value comparisons spent matching one
	// prediction against an instance's gold tables. Matching is columns ×
	// columns × rows at worst (many long columns alike but for their last
	// values); real tables stop at the first differing value and stay
	// orders of magnitude below. Default DefaultMaxCompare.
	MaxCompare int64
}

// Defaults of Limits. Spider 2.0's largest gold results are a few MB and
// well under a million cells; 5 million cells is about 500 MB at the peak
// of reading one table, and 5×10^8 comparisons take one to two seconds.
const (
	DefaultMaxBytes   = dataset.MaxGoldCSVBytes
	DefaultMaxCells   = 5_000_000
	DefaultMaxCompare = 500_000_000
)

// ResultLimits are the warehouse limits sql mode runs predictions under
// (set them as localdb.Warehouses.Limits, and as Config.ResultLimits so
// errors name them). A result they cut scores 0 as too large rather than
// being compared truncated. 500,000 rows and 32 MiB of cell data are far
// above any Spider 2.0 or BIRD gold result; 32 MiB of cells renders to at
// most about MaxBytes of CSV for ordinary (non-binary) values.
var ResultLimits = warehouse.Limits{MaxRows: 500_000, MaxBytes: 32 << 20}

// ErrTooLarge is wrapped by every error about an input beyond Limits.
var ErrTooLarge = errors.New("result too large")

// withDefaults fills zero fields with the defaults.
func (l Limits) withDefaults() Limits {
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxCells == 0 {
		l.MaxCells = DefaultMaxCells
	}
	if l.MaxCompare == 0 {
		l.MaxCompare = DefaultMaxCompare
	}
	return l
}

// bytesOver reports whether n bytes exceed the (defaulted) byte limit.
func (l Limits) bytesOver(n int64) bool { return l.MaxBytes > 0 && n > l.MaxBytes }

// cellsOver reports whether n cells exceed the (defaulted) cell limit.
func (l Limits) cellsOver(n int64) bool { return l.MaxCells > 0 && n > int64(l.MaxCells) }

// readBounded reads a file of at most limit bytes (negative: no limit).
// It checks the size before reading and reads no more than limit+1 bytes,
// so neither a huge file nor an endless one (a FIFO, /dev/zero) is loaded.
// An oversized file fails with an error wrapping tooLarge.
func readBounded(path string, limit int64, tooLarge error) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if limit < 0 {
		return io.ReadAll(f)
	}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > limit {
		return nil, fmt.Errorf("%w: %s is %d bytes (limit %d bytes)", tooLarge, path, st.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: %s is more than %d bytes (limit %d bytes)", tooLarge, path, limit, limit)
	}
	return data, nil
}

// truncatedError explains a query result a warehouse limit cut: who is
// "the prediction" or "the gold SQL".
func truncatedError(res *warehouse.Result, lim warehouse.Limits, who string) error {
	switch res.TruncatedBy {
	case "rows":
		limit := int64(lim.MaxRows)
		if limit <= 0 {
			limit = int64(len(res.Rows))
		}
		return fmt.Errorf("%w: %s returned more than %d rows (limit %d rows); aggregate, filter or add a LIMIT", ErrTooLarge, who, limit, limit)
	case "bytes":
		limit := lim.MaxBytes
		if limit <= 0 {
			limit = res.Bytes
		}
		return fmt.Errorf("%w: %s returned more than %d bytes of values after %d rows (limit %d bytes); aggregate, filter or add a LIMIT", ErrTooLarge, who, limit, len(res.Rows), limit)
	}
	return fmt.Errorf("%w: %s's result was cut at a %s limit after %d rows; aggregate, filter or add a LIMIT", ErrTooLarge, who, res.TruncatedBy, len(res.Rows))
}

// limitWriter fails once more than n bytes were written, so rendering a
// result to CSV stops at the limit instead of building the whole text.
type limitWriter struct {
	w io.Writer
	n int64 // bytes still allowed; negative: no limit
}

// errWriteLimit marks a limitWriter that refused a write.
var errWriteLimit = errors.New("write limit reached")

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n >= 0 {
		if int64(len(p)) > l.n {
			return 0, errWriteLimit
		}
		l.n -= int64(len(p))
	}
	return l.w.Write(p)
}
