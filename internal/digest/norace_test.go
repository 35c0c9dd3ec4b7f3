//go:build !race

package digest

const raceDetector = false
