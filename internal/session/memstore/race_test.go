//go:build race

package memstore

// raceDetector: built with -race, whose shadow memory is resident too.
const raceDetector = true
