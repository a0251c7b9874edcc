package sqlite

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"unsafe"

	"modernc.org/libc"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The driver hands a Go SQL function a *msqlite.FunctionContext with no
// accessor, so a long call could not see that its statement was
// interrupted. callView mirrors the context's two fields (the connection's
// libc TLS and the sqlite3_context) so that a call can ask SQLite itself,
// on the goroutine and TLS that run the statement. checkCallContext
// verifies the mirror field by field; Open refuses to run without it
// rather than bring back calls that cannot be stopped.
type callView struct {
	tls *libc.TLS
	ctx uintptr
}

// checkCallContext reports whether msqlite.FunctionContext still has the
// layout callView mirrors (a driver upgrade that changes it fails here).
func checkCallContext() error {
	t := reflect.TypeFor[msqlite.FunctionContext]()
	ok := t.NumField() == 2 && t.Size() == unsafe.Sizeof(callView{}) &&
		t.Field(0).Name == "tls" && t.Field(0).Type == reflect.TypeFor[*libc.TLS]() && t.Field(0).Offset == unsafe.Offsetof(callView{}.tls) &&
		t.Field(1).Name == "ctx" && t.Field(1).Type.Kind() == reflect.Uintptr && t.Field(1).Offset == unsafe.Offsetof(callView{}.ctx)
	if !ok {
		return fmt.Errorf("sqlite driver's FunctionContext layout changed (%v); the interruptible SQL functions need updating", t)
	}
	return nil
}

func viewOf(fc *msqlite.FunctionContext) *callView { return (*callView)(unsafe.Pointer(fc)) }

// errInterrupted ends a Go SQL function whose statement was interrupted;
// Query reports the statement as stopped by its timeout or its caller.
var errInterrupted = errors.New("interrupted")

// checkEvery is how many units of work (bytes or characters compared) a
// long call does between two looks at the interrupt flag: well under a
// millisecond, at the cost of one atomic load.
const checkEvery = 1 << 14

// stopper counts a call's work and looks at SQLite's interrupt flag every
// checkEvery units.
type stopper struct {
	v    *callView
	work int
}

func newStopper(fc *msqlite.FunctionContext) *stopper { return &stopper{v: viewOf(fc)} }

// tick adds n units of work; it returns errInterrupted once the statement
// running the call has been interrupted.
func (s *stopper) tick(n int) error {
	s.work += n
	if s.work < checkEvery {
		return nil
	}
	s.work = 0
	db := sqlite3.Xsqlite3_context_db_handle(s.v.tls, s.v.ctx)
	if sqlite3.Xsqlite3_is_interrupted(s.v.tls, db) != 0 {
		return errInterrupted
	}
	return nil
}

// textOf is sqlite3_value_text of a function argument: ok is false for
// NULL; numbers take SQLite's own text form, so that an override sees the
// bytes the built-in saw.
func textOf(fc *msqlite.FunctionContext, v driver.Value) (s string, ok bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, true
	case []byte:
		return string(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case float64:
		return floatText(viewOf(fc).tls, x), true
	}
	return fmt.Sprint(v), true
}

// floatText renders f as SQLite renders a REAL as text (vdbeMemRenderNum:
// "%!.*g" with the connection's default 17 digits), through SQLite's own
// printf, so that "3.0", "1.0e+20" and "0.33333333333333332" match.
func floatText(tls *libc.TLS, f float64) string {
	format, err := libc.CString("%!.17g")
	if err != nil {
		return strconv.FormatFloat(f, 'g', 17, 64)
	}
	defer libc.Xfree(tls, format)
	va := tls.Alloc(8)
	defer tls.Free(8)
	p := sqlite3.Xsqlite3_mprintf(tls, format, libc.VaList(va, f))
	if p == 0 {
		return strconv.FormatFloat(f, 'g', 17, 64)
	}
	defer sqlite3.Xsqlite3_free(tls, p)
	return libc.GoString(p)
}
