#!/usr/bin/env bash
# Debian's aiohttp and prometheus-client for the reference servers' tests
# (servers/test_*.py), when they are missing and packages can be installed
# (root). Without them only the servers' contract tests run; the rest skip.
set -euo pipefail
py=/usr/bin/python3
if [ -x "$py" ] && "$py" -c 'import aiohttp, prometheus_client' 2>/dev/null; then
  echo "install-python-test-deps: $py has aiohttp and prometheus_client"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "install-python-test-deps: not root or no apt-get; the servers' HTTP tests will skip" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq python3 python3-aiohttp python3-prometheus-client >/dev/null
echo "install-python-test-deps: installed python3-aiohttp and python3-prometheus-client"
