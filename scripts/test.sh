#!/usr/bin/env bash
# Runs every check of the project: formatting, vet, all Go tests with the
# race detector, the end-to-end rehearsal of ollama, and the reference
# servers' Python tests. Fetches what it needs: Go modules through the module proxy,
# and Debian's chromium for the browser test of report.html when it can
# install packages (root); elsewhere that one test is skipped with a message.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -x scripts/install-browser.sh ] || [ -f scripts/install-browser.sh ]; then
  bash scripts/install-browser.sh || echo "test.sh: chromium could not be installed; the browser test will say so" >&2
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "test.sh: gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
go test -race -timeout 20m ./...

# The end-to-end rehearsal of a real engine rehearse did not write: ollama
# v0.24.0 serving a model rehearse writes (examples/ollama.yaml at a small
# size, examples/ollama_run_test.go), after the race suite rather than beside
# it on 2 cores. The install builds ollama into ~/.cache/rehearse once (4-6
# minutes cold on 2 cores, a no-op after); the test takes about a minute.
# Budget for this step: 10 minutes cold, 2 minutes warm. Where ollama cannot
# be installed (no root for its headers, no C++ compiler) the test skips and
# says why, except under REHEARSE_REQUIRE_OLLAMA=1 (CI), where that fails.
ollama_start=$(date +%s)
bash scripts/install-ollama.sh || echo "test.sh: ollama could not be installed; the end-to-end test will say so" >&2
go test -count=1 -timeout 15m -run 'TestOllama' ./examples/
echo "test.sh: the ollama step took $(($(date +%s) - ollama_start)) s (budget: 600 s cold, 120 s warm)"

# The reference servers (the project's only Python): their contract and HTTP
# tests run without torch; Debian's aiohttp and prometheus-client are
# installed for them when possible, else those tests skip.
bash scripts/install-python-test-deps.sh || true
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
(cd servers && "$py" -m unittest 2>&1 | tail -n 4)
