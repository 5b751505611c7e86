//go:build race

package aipolicy

const raceEnabled = true
