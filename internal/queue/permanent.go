package queue

import "errors"

// IsPermanent reports whether err, or an error it wraps, came from
// Permanent: a handler's error the work loop gives up on at once.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}
