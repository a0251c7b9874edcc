//go:build !race

package llmsim

const raceEnabled = false
