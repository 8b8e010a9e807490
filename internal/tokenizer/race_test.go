//go:build race

package tokenizer

// raceEnabled is true under the race detector, where the golden tests
// check a sample of the corpus: the detector makes them ten times slower.
const raceEnabled = true
