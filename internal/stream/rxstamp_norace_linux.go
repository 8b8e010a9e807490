//go:build !race

package stream

// raceSynced is for race builds (rxstamp_race_linux.go).
func raceSynced(uintptr) {}
