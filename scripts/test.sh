#!/usr/bin/env bash
# Runs every check of the project: formatting, vet, all Go tests with the
# race detector, and the reference servers' Python tests. Fetches what it needs: Go modules through the module proxy,
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

# The reference servers (the project's only Python): their contract and HTTP
# tests run without torch; Debian's aiohttp and prometheus-client are
# installed for them when possible, else those tests skip.
bash scripts/install-python-test-deps.sh || true
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
(cd servers && "$py" -m unittest 2>&1 | tail -n 4)
