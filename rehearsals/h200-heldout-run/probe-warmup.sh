#!/bin/bash
# Where the batching reference server's warm-up runs out of memory, and which
# setting lets it finish: prints transformers' warm-up and cache-sizing code,
# then starts the server with each candidate setting until it is ready.
# Run on the GPU machine from the repository root; output in RUN.md.
set -u
gunzip -c internal/tokenizer/qwen3/tokenizer.json.gz > /tmp/tokenizer.json
python3 - <<'PY'
import inspect, transformers
from transformers.generation.continuous_batching import continuous_api as api
print("transformers", transformers.__version__)
m = api.ContinuousBatchingManager
if hasattr(m, "warmup"):
    print(inspect.getsource(m.warmup))
import transformers.generation.continuous_batching as cb, pathlib, re
root = pathlib.Path(cb.__file__).parent
for f in sorted(root.glob("*.py")):
    for i, line in enumerate(f.read_text().splitlines(), 1):
        if re.search(r"max_memory_percent|max_batch_tokens\s*=|def warmup|def _warmup|def infer_num_blocks", line):
            print(f"{f.name}:{i}: {line.strip()}")
PY
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv
try() {
  echo "== $*"
  log=/tmp/probe.log; : > $log
  python3 servers/batching_server.py --random-weights --tokenizer-file /tmp/tokenizer.json \
    --dtype float16 --port 8199 --max-num-seqs 64 "$@" > $log 2>&1 &
  pid=$!; began=$SECONDS
  while kill -0 $pid 2>/dev/null; do
    if grep -q ": ready, serving" $log; then break; fi
    sleep 1
  done
  grep -E "warm|Warm|memory|ready|failed|loaded" $log | cut -c1-400
  echo "-- after $((SECONDS - began)) s"
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
}
try
try --max-memory-percent 0.5
try --max-batch-tokens 8192
