package llmsim

// RaceEnabled is raceEnabled for the package's external tests
// (llmsim_test), which ask a subset of their requests under the race
// detector too.
const RaceEnabled = raceEnabled
