package tokenizer

import (
	"runtime"
	"testing"
)

// BenchmarkLoad measures parsing the embedded Qwen3 tokenizer.json (already
// decompressed) into a ready Tokenizer, and reports the heap it keeps.
func BenchmarkLoad(b *testing.B) {
	data, err := embeddedJSON()
	if err != nil {
		b.Fatal(err)
	}
	var keep *Tokenizer
	for b.Loop() {
		keep, err = Parse(data)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	keep = nil
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(before.HeapAlloc-after.HeapAlloc)/(1<<20), "MB-kept")
	runtime.KeepAlive(keep)
}
