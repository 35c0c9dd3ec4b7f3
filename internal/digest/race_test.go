//go:build race

package digest

// raceDetector: built with -race, whose sync.Pool drops some of what it is
// given, so allocation counts mean nothing.
const raceDetector = true
