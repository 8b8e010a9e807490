#!/usr/bin/env bash
# Measures the reference servers (servers/) on a GPU machine with rehearse
# bench, for the h200-transformers-* simulator profiles. Random weights of
# the Qwen2.5-1.5B architecture, FP16, ignore_eos (every request 128 tokens).
#
# usage (from the repository root, on the GPU machine):
#   BIN=bin/rehearse TOK=.device-carry/tokenizer.json OUT=out/h200 internal/sim/profiles/measure/h200.sh
set -u -o pipefail
BIN=${BIN:-bin/rehearse}
TOK=${TOK:-.device-carry/tokenizer.json}
OUT=${OUT:-out/h200-measure}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import sys, torch, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__)"
  nproc; } > "$OUT/env.txt" 2>&1

healthy() { python3 - "$1" <<'PY'
import sys, time, urllib.request
url = "http://127.0.0.1:%s/health" % sys.argv[1]
for _ in range(600):
    try:
        if urllib.request.urlopen(url, timeout=1).status == 200:
            sys.exit(0)
    except Exception:
        pass
    time.sleep(0.5)
sys.exit(1)
PY
}

measure() { # name port concurrencies repeats
  local name=$1 port=$2 conc=$3 repeats=$4
  local t0=$EPOCHREALTIME
  python3 -u "servers/${name}_server.py" --random-weights --tokenizer-file "$TOK" --port "$port" > "$OUT/$name.log" 2>&1 &
  local pid=$!
  if ! healthy "$port"; then echo "$name: not healthy"; kill -TERM "$pid"; wait "$pid"; return 1; fi
  echo "$name: healthy after $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}') s"
  "$BIN" bench --base-url "http://127.0.0.1:$port" --name "$name" --concurrency "$conc" --repeats "$repeats" \
    --warmup-waves 1 --extra-body '{"ignore_eos":true}' --tokenizer "$TOK" --progress never -o "$OUT/$name-bundle" 2>&1 | tail -n 12
  kill -TERM "$pid"; wait "$pid"
}

measure naive 8000 1,4 2
measure batching 8001 1,8,32,64,128 3
