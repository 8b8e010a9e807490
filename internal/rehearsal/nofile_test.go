package rehearsal_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/drive"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/workload"
)

// A plan that needs more open files than the process may have is refused
// before the first server is launched, and no bundle folder is made.
func TestRunRefusesAPlanBeyondTheOpenFileLimit(t *testing.T) {
	cfg, err := config.Parse([]byte("model: {id: m}\nservers:\n  - {name: s, launch: [/nonexistent/server, '{port}']}\nworkload: {concurrencies: [1, 1073741824]}\n"), "test.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	var events []rehearsal.Event
	_, err = rehearsal.Run(context.Background(), rehearsal.Options{
		Rehearsal: cfg, Dir: dir, Prompts: workload.Texts("p"),
		Progress: func(ev rehearsal.Event) { events = append(events, ev) },
	})
	var de *drive.DescriptorError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "concurrency 1073741824") {
		t.Fatalf("err %v, want the plan refused for its descriptors", err)
	}
	if len(events) > 0 {
		t.Fatalf("the rehearsal went on: %+v", events[0])
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused plan left a bundle folder: %v", err)
	}
}
