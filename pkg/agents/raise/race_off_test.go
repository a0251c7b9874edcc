//go:build !race

package raise

const raceEnabled = false
