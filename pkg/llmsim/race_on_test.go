//go:build race

package llmsim

// raceEnabled: the race detector makes every request several times slower,
// so tests that replay many requests for coverage ask a subset under it;
// the step without -race asks them all.
const raceEnabled = true
