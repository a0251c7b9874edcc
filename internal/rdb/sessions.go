package rdb

// Sessions: internal/runtime/runstate (sessions.go). A run's sessions are
// the stretches a coordinator drove it, from its start to its interruption,
// crash or end; resuming a run starts another. They are kept so that a
// later session reports the run's wall time and every example's latency,
// not only its own.
//
//	key (after quorum:)   owner (writer)        holds                                       TTL / retention
//	run:<run>:sessions    runstate (the         hash "count" → sessions begun; "<n>" →      none; retired: state
//	                      coordinator)          session n's start, end, closed (JSON)

// SessionsKey holds run's sessions (see above).
func SessionsKey(run string) string { return RunKey(run, "sessions") }

// SessionCountField is SessionsKey's field counting the sessions begun: the
// next session's number is its increment.
const SessionCountField = "count"
