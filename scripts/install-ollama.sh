#!/usr/bin/env bash
# Installs ollama v0.24.0 (llama.cpp and ggml through cgo) from the Go module
# proxy into a cache folder outside the clone, for the end-to-end test of a
# real engine (internal/ollamatest) and examples/ollama.yaml:
#
#   ${REHEARSE_CACHE:-$HOME/.cache/rehearse}/ollama-v0.24.0/bin/ollama
#
# A no-op when that binary is already there. A cold build takes about 4-6
# minutes on 2 cores; the script prints how long it took.
#
# The module zip drops ollama's vendor/ folders, so three headers are missing:
# Debian's nlohmann-json3-dev and libstb-dev supply two (installed here when
# run as root), and miniaudio.h comes from the Go module
# github.com/gen2brain/malgo@v0.11.24, copied to include/miniaudio/ in the
# cache folder, which goes on CPATH (llama.cpp includes
# "miniaudio/miniaudio.h"). The tag is pinned: @latest resolves to an older
# release, and later tags fetch llama.cpp at build time, which fails offline.
set -euo pipefail

version=v0.24.0
malgo=github.com/gen2brain/malgo@v0.11.24
cache="${REHEARSE_CACHE:-$HOME/.cache/rehearse}"
dest="$cache/ollama-$version"
bin="$dest/bin/ollama"
start=$(date +%s)

if [ -x "$bin" ]; then
  echo "install-ollama: $bin is present (ollama $version; 0 s)"
  exit 0
fi

need_headers() {
  [ ! -f /usr/include/nlohmann/json.hpp ] || [ ! -f /usr/include/stb/stb_image.h ]
}
if need_headers; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "install-ollama: nlohmann/json.hpp or stb/stb_image.h is missing; install Debian's nlohmann-json3-dev and libstb-dev (needs root and apt-get)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  echo "install-ollama: installing Debian's nlohmann-json3-dev and libstb-dev"
  apt-get update -qq
  apt-get install -y -qq nlohmann-json3-dev libstb-dev >/dev/null
fi
for tool in gcc g++; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install-ollama: $tool is missing; ollama's cgo build needs a C and C++ compiler (Debian: build-essential)" >&2
    exit 1
  fi
done

malgo_dir=$(go mod download -json "$malgo" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ ! -f "$malgo_dir/miniaudio.h" ]; then
  echo "install-ollama: miniaudio.h not found in $malgo ($malgo_dir)" >&2
  exit 1
fi

mkdir -p "$dest/bin" "$dest/include/miniaudio"
cp "$malgo_dir/miniaudio.h" "$dest/include/miniaudio/miniaudio.h"

# Build into a scratch folder and move the binary into place only when the
# build succeeded, so an interrupted build never looks like an installed one.
scratch=$(mktemp -d "$dest/build.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# ollama's cgo flags build ggml's CPU backend for the baseline x86-64 (no
# AVX2, F16C or FMA), which makes its matrix products scalar: so slow that a
# model's decode is compute-bound and batching cannot pay. -march=native
# builds it for this machine, whose cache keeps the binary. The version is
# stamped as ollama's own build does.
echo "install-ollama: building ollama $version with go install (cgo, -march=native; several minutes on 2 cores)"
CGO_ENABLED=1 CPATH="$dest/include${CPATH:+:$CPATH}" GOBIN="$scratch" \
  CGO_CFLAGS="-O3 -march=native" CGO_CXXFLAGS="-O3 -march=native" \
  go install -ldflags "-X github.com/ollama/ollama/version.Version=${version#v}" "github.com/ollama/ollama@$version"
mv "$scratch/ollama" "$bin"
echo "install-ollama: installed $bin ($(du -m "$bin" | cut -f1) MiB) in $(($(date +%s) - start)) s"
