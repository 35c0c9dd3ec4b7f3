//go:build race

package session

// raceDetector: built with -race, whose shadow memory is resident too.
const raceDetector = true
