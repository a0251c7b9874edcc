//go:build race

package reforce

const raceEnabled = true
