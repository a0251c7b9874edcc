package dataset

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// resolveInside resolves path, symlinks followed, and returns the real
// path when it stays inside base (the dataset root or --sqlite-dir),
// resolved the same way. A link out of the dataset would hand any local
// file to the prompts, the LLM endpoint and --out, so it is refused.
//
// One exception: a folder directly in base (resource/, evaluation_suite/,
// database/, …) may itself be a link, and what is under it must then stay
// inside its target. That is how one dataset shares another's resources
// (quorum bench does so); nothing deeper may lead out.
func resolveInside(base, path string) (string, error) {
	absBase, err := filepath.Abs(base)
	if err != nil {
		return "", fmt.Errorf("dataset folder %s: %w", base, err)
	}
	absPath, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	realBase, err := filepath.EvalSymlinks(absBase)
	if err != nil {
		return "", fmt.Errorf("dataset folder %s: %w", base, err)
	}
	real, err := filepath.EvalSymlinks(absPath)
	if err != nil {
		return "", err
	}
	if under(realBase, real) {
		return real, nil
	}
	if rel, err := filepath.Rel(absBase, absPath); err == nil && !escapes(rel) {
		top, rest, deeper := strings.Cut(rel, string(filepath.Separator))
		link := filepath.Join(absBase, top)
		if st, err := os.Lstat(link); deeper && rest != "" && err == nil && st.Mode()&os.ModeSymlink != 0 {
			if target, err := filepath.EvalSymlinks(link); err == nil && under(target, real) {
				return real, nil
			}
		}
	}
	return "", fmt.Errorf("%s resolves to %s, %w %s: a link leading out is refused; copy it into the dataset", path, real, errOutside, realBase)
}

// under reports whether path is dir or inside it; both are resolved.
func under(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && !escapes(rel)
}

func escapes(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel)
}

// errOutside is wrapped by every error about a file leading out of the
// dataset.
var errOutside = errors.New("outside the folder")

// errTooLarge is wrapped by every error about a file over its limit.
var errTooLarge = errors.New("over the size limit")

// readInside reads path, which must resolve inside base, refusing it before
// reading when it is over limit bytes or not a regular file (a FIFO or
// device would block or never end). what names the kind of file in errors
// ("document", "table JSON").
func readInside(base, path string, limit int64, what string) ([]byte, error) {
	real, err := statInside(base, path, limit, what)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(real)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	// The file may have grown since: read at most one byte past the limit.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(what, path, int64(len(data)), limit)
	}
	return data, nil
}

// statInside checks, without reading it, that path resolves inside base,
// is a regular file and is within limit bytes; it returns the real path.
// Used alone for files other code reads later (metadata, gold CSVs), so a
// dataset is refused when it loads rather than when a run reaches them.
func statInside(base, path string, limit int64, what string) (string, error) {
	real, err := resolveInside(base, path)
	if errors.Is(err, errOutside) {
		return "", fmt.Errorf("%s %w", what, err)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s %s is not a regular file", what, path)
	}
	if st.Size() > limit {
		return "", tooLarge(what, path, st.Size(), limit)
	}
	return real, nil
}

func tooLarge(what, path string, size, limit int64) error {
	return fmt.Errorf("%s %s is %d bytes, %w of %d bytes for a %s: shorten it or leave it out of the dataset", what, path, size, errTooLarge, limit, what)
}

// lineReader reads a file line by line holding at most max bytes of a
// line: a longer one is read past, not kept, and reported by its length,
// so one runaway line costs neither memory nor the lines after it.
type lineReader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its line ending. For a line over the
// limit it returns a nil line and the line's full size. At the end it
// returns io.EOF (after the last line, even one with no newline).
func (l *lineReader) next() (line []byte, size int64, err error) {
	l.buf = l.buf[:0]
	over := false
	for {
		chunk, err := l.br.ReadSlice('\n')
		size += int64(len(chunk))
		if !over {
			if len(l.buf)+len(chunk) > l.max+2 { // +2: the "\r\n" ending
				over, l.buf = true, l.buf[:0]
			} else {
				l.buf = append(l.buf, chunk...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && size == 0:
			return nil, 0, io.EOF
		case err != nil && err != io.EOF:
			return nil, size, err
		}
		if over {
			return nil, size, nil
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(l.buf, []byte("\n")), []byte("\r"))
		if len(line) > l.max {
			return nil, size, nil
		}
		return line, size, nil
	}
}
