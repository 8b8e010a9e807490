// Package npmtest installs pinned npm packages for tests that check rehearse
// against an independent JavaScript implementation.
package npmtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// SkipOrFail skips with msg, or fails where the independent check is
// required: on CI (CI=true) and wherever REHEARSE_REQUIRE_OLLAMA=1.
func SkipOrFail(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" || os.Getenv("REHEARSE_REQUIRE_OLLAMA") == "1" {
		t.Fatal(msg + " (CI=true or REHEARSE_REQUIRE_OLLAMA=1 makes this a failure)")
	}
	t.Skip(msg)
}

// Prefix installs pkg ("@scope/name@version") with npm into the cache
// folder ($REHEARSE_CACHE, else ~/.cache/rehearse) once and returns its npm
// prefix; what needs it is said in skip messages.
func Prefix(t testing.TB, pkg, what string) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			SkipOrFail(t, tool+" is not on PATH; "+what+" needs Node.js and npm")
		}
	}
	cache := os.Getenv("REHEARSE_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			SkipOrFail(t, "no home folder for the npm cache: "+err.Error())
		}
		cache = filepath.Join(home, ".cache", "rehearse")
	}
	at := strings.LastIndex(pkg, "@")
	name, version := pkg[:at], pkg[at+1:]
	prefix := filepath.Join(cache, strings.ReplaceAll(strings.TrimPrefix(name, "@"), "/", "-")+"-"+version)
	if _, err := os.Stat(filepath.Join(prefix, "node_modules", name, "package.json")); err == nil {
		return prefix
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--prefix", prefix, pkg).CombinedOutput()
	if err != nil {
		SkipOrFail(t, "npm install "+pkg+" failed: "+err.Error()+"\n"+string(out))
	}
	return prefix
}
