//go:build race

package llm_test

// raceEnabled: the race detector slows every goroutine several times, which
// throughput-at-the-quota tests cannot tell from a slow network.
const raceEnabled = true
