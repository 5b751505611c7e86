//go:build !race

package promptcache

const raceEnabled = false
