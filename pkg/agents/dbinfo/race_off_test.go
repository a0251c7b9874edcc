//go:build !race

package dbinfo

const raceEnabled = false
