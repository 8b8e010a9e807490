//go:build race

package examples_test

// raceEnabled is true under the race detector; the end-to-end ollama test
// then leaves the machine to the race suite (scripts/test.sh runs it after).
const raceEnabled = true
