package sqlite

import (
	"path/filepath"
	"strings"
)

// Tenants and the model see query errors; the server's paths are not
// theirs to see. Errors name the database instead.

// redact replaces the database file's path, and then its folder, in msg.
func (d *DB) redact(msg string) string {
	if d.cfg.Path == "" {
		return msg
	}
	escaped := strings.NewReplacer("?", "%3f", "#", "%23").Replace(d.cfg.Path)
	msg = strings.ReplaceAll(msg, d.cfg.Path, d.name)
	msg = strings.ReplaceAll(msg, escaped, d.name)
	if dir := filepath.Dir(d.cfg.Path); dir != string(filepath.Separator) {
		msg = strings.ReplaceAll(msg, dir+string(filepath.Separator), "")
		msg = strings.ReplaceAll(msg, dir, ".")
	}
	return msg
}

// pathHidden is an error whose text had a path taken out; errors.Is and
// errors.As still see the original.
type pathHidden struct {
	msg string
	err error
}

func (e *pathHidden) Error() string { return e.msg }
func (e *pathHidden) Unwrap() error { return e.err }

// hide returns err with the path taken out of its text (err itself when
// there was none).
func (d *DB) hide(err error) error {
	if err == nil {
		return nil
	}
	msg := d.redact(err.Error())
	if msg == err.Error() {
		return err
	}
	return &pathHidden{msg: msg, err: err}
}
