//go:build !race

package pexa_test

const raceEnabled = false
