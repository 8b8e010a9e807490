#!/usr/bin/env bash
# Installs headless Chromium from Debian's packages for the browser test of
# report.html (internal/report/html_browser_test.go), unless a chromium is
# already on PATH. Needs root (CI runs as root); prints what it did.
set -euo pipefail

for name in chromium chromium-browser; do
  if command -v "$name" >/dev/null 2>&1; then
    echo "install-browser: $(command -v "$name") is present ($("$name" --version 2>/dev/null || echo 'version unknown'))"
    exit 0
  fi
done

if [ "$(id -u)" -ne 0 ]; then
  echo "install-browser: chromium is missing and installing it needs root: sudo apt-get install -y chromium" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-browser: chromium is missing and this system has no apt-get; install Chromium by its own package manager" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
echo "install-browser: installing Debian's chromium (and fonts-liberation, the figures' font)"
apt-get update -qq
apt-get install -y -qq chromium fonts-liberation >/dev/null
echo "install-browser: $(command -v chromium) installed ($(chromium --version 2>/dev/null || echo 'version unknown'))"
