"""speed.py times Hugging Face's tokenizers (Python) encoding files, one chunk
at a time, single-threaded, exactly as speed.js does with the npm binding.

    RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false python3 bench/tokenizer/speed.py [--chunk 4096] [--min-s 3] FILE...
"""
import gzip
import json
import os
import sys
import time

from tokenizers import Tokenizer


def chunks(text, size):
    out, cur, cur_bytes = [], [], 0
    for line in _lines(text):
        n = len(line.encode("utf-8"))
        if cur_bytes > 0 and cur_bytes + n > size:
            out.append("".join(cur))
            cur, cur_bytes = [], 0
        cur.append(line)
        cur_bytes += n
    if cur_bytes > 0:
        out.append("".join(cur))
    return out


def _lines(text):
    # Split after each "\n" only, as speed.js and speed_test.go do.
    start = 0
    while True:
        i = text.find("\n", start)
        if i < 0:
            if start < len(text):
                yield text[start:]
            return
        yield text[start : i + 1]
        start = i + 1


def main():
    args = sys.argv[1:]
    chunk, min_s, files = 4096, 3.0, []
    i = 0
    while i < len(args):
        if args[i] == "--chunk":
            chunk = int(args[i + 1])
            i += 2
        elif args[i] == "--min-s":
            min_s = float(args[i + 1])
            i += 2
        else:
            files.append(args[i])
            i += 1
    here = os.path.dirname(os.path.abspath(__file__))
    gz = os.path.join(here, "..", "..", "internal", "tokenizer", "qwen3", "tokenizer.json.gz")
    tok = Tokenizer.from_str(gzip.open(gz).read().decode("utf-8"))
    for f in files:
        text = open(f, encoding="utf-8", newline="").read()
        parts = chunks(text, chunk)
        nbytes = len(text.encode("utf-8"))
        tokens = sum(len(tok.encode(p, add_special_tokens=False).ids) for p in parts)
        passes, t0 = 0, time.perf_counter()
        el = 0.0
        while el < min_s:
            for p in parts:
                tok.encode(p, add_special_tokens=False)
            passes += 1
            el = time.perf_counter() - t0
        s = el / passes
        print(json.dumps({"file": f, "bytes": nbytes, "tokens": tokens, "chunks": len(parts), "s_per_pass": s, "mb_s": nbytes / s / 1e6}))


if __name__ == "__main__":
    main()
