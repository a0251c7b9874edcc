//go:build race

package dbinfo

const raceEnabled = true
