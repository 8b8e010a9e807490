package bundletest

import (
	"os"
	"path/filepath"

	"github.com/rehearse/rehearse/internal/bundle"
)

// Encode returns the bytes of results.json as the binary writes it
// (bundle.WriteResults), through a temporary folder.
func Encode(r *bundle.Results) ([]byte, error) {
	dir, err := os.MkdirTemp("", "bundletest-encode-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := bundle.WriteResults(dir, r); err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(dir, bundle.ResultsFile))
}

// Decode reads data as the binary reads a results.json
// (bundle.ReadResults: streamed, then held whole to name the line of what
// is wrong), through a temporary folder; its errors name results.json.
func Decode(data []byte) (*bundle.Results, error) {
	dir, err := os.MkdirTemp("", "bundletest-decode-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, bundle.ResultsFile), data, 0o644); err != nil {
		return nil, err
	}
	return bundle.ReadResults(dir)
}
