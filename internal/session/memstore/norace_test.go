//go:build !race

package memstore

const raceDetector = false
