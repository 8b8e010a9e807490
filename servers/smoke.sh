#!/usr/bin/env bash
# Smoke test of the reference servers on a GPU machine: for each server, start it, wait for
# /health, send one streamed request printed chunk by chunk, scrape /metrics, optionally
# send a burst of concurrent requests, then SIGTERM it and check that it exits 0 in time.
#
# usage: servers/smoke.sh [naive] [batching]        (default: both)
# environment:
#   PYTHON          interpreter with torch, transformers, aiohttp, prometheus-client (python3)
#   TOKENIZER_FILE  tokenizer.json for --tokenizer-file (empty: the model's own tokenizer)
#   MODEL_ARGS      weights flags (default: --random-weights)
#   PORT            port to serve on (8000)
#   MAX_TOKENS      tokens in the streamed request (16)
#   BURST_CLIENTS   concurrent requests in the burst, 0 to skip (0); BURST_CLIENTS_naive etc. per server
#   BURST_TOKENS    tokens per burst request (128); BURST_TOKENS_naive etc. per server
#   HEALTH_WAIT_S   how long a server may take to load and warm up (600)
#   LOG_DIR         where each server's log goes (a temporary directory)
#   EXTRA_ARGS_naive / EXTRA_ARGS_batching   more flags for one server
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
PORT=${PORT:-8000}
MAX_TOKENS=${MAX_TOKENS:-16}
HEALTH_WAIT_S=${HEALTH_WAIT_S:-600}
BURST_CLIENTS=${BURST_CLIENTS:-0}
BURST_TOKENS=${BURST_TOKENS:-128}
MODEL_ARGS=${MODEL_ARGS:---random-weights}
LOG_DIR=${LOG_DIR:-$(mktemp -d)}
base="http://127.0.0.1:${PORT}"
client=("$PYTHON" -u "$here/smoke_client.py" --base-url "$base")
servers=("$@")
[ ${#servers[@]} -eq 0 ] && servers=(naive batching)

failures=0
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
for server in "${servers[@]}"; do
  case "$server" in naive|batching) ;; *) echo "smoke: unknown server '$server' (naive or batching)"; exit 2;; esac
  log="$LOG_DIR/$server.log"
  extra_var="EXTRA_ARGS_${server}"
  args=(--port "$PORT" $MODEL_ARGS ${!extra_var:-})
  [ -n "${TOKENIZER_FILE:-}" ] && args+=(--tokenizer-file "$TOKENIZER_FILE")
  echo "=== $server: $PYTHON -u servers/${server}_server.py ${args[*]}"
  PYTHONUNBUFFERED=1 "$PYTHON" -u "$here/${server}_server.py" "${args[@]}" >"$log" 2>&1 &
  pid=$!
  started=$EPOCHREALTIME
  ok=1
  clients_var="BURST_CLIENTS_${server}"; clients=${!clients_var:-$BURST_CLIENTS}
  tokens_var="BURST_TOKENS_${server}"; tokens=${!tokens_var:-$BURST_TOKENS}
  if "${client[@]}" health --wait-s "$HEALTH_WAIT_S" --pid "$pid"; then
    echo "--- $server: ready $(elapsed "$started") s after launch"
    "${client[@]}" chat --max-tokens "$MAX_TOKENS" --ignore-eos || ok=0
    "${client[@]}" metrics || ok=0
    if [ "$clients" -gt 0 ]; then
      "${client[@]}" burst --clients 1 --max-tokens "$tokens" || ok=0
      "${client[@]}" burst --clients "$clients" --max-tokens "$tokens" || ok=0
    fi
  else
    ok=0
  fi
  echo "--- $server: SIGTERM"
  stop_began=$EPOCHREALTIME
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "--- $server: still running 15 s after SIGTERM; SIGKILL"
    kill -KILL "$pid"; wait "$pid"; ok=0
  else
    wait "$pid"; code=$?
    echo "--- $server: exited with code $code $(elapsed "$stop_began") s after SIGTERM"
    [ "$code" -eq 0 ] || ok=0
  fi
  echo "--- $server: log ($log)"
  sed 's/^/  | /' "$log"
  if [ "$ok" -eq 1 ]; then echo "=== $server: PASS"; else echo "=== $server: FAIL"; failures=$((failures + 1)); fi
done
exit "$failures"
