// speed.js times Hugging Face's tokenizers library (npm binding) encoding
// files, one chunk at a time, single-threaded: each file is cut into chunks
// of whole lines of at most CHUNK bytes (the same cut as speed_test.go and
// speed.py make), every chunk is encoded in turn, and the passes repeat for
// at least MIN_S seconds after one warm-up pass. Prints one JSON line per file:
//   {"file": ..., "bytes": ..., "tokens": ..., "chunks": ..., "s_per_pass": ..., "mb_s": ...}
//
//   RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false node bench/tokenizer/speed.js [--chunk 4096] [--min-s 3] FILE...
'use strict';
const fs = require('fs');
const { load } = require('./lib.js');

let chunk = 4096;
let minS = 3;
const files = [];
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--chunk') chunk = Number(args[++i]);
  else if (args[i] === '--min-s') minS = Number(args[++i]);
  else files.push(args[i]);
}

// chunks cuts text into runs of whole lines of at most size bytes (a longer
// line is a chunk of its own).
function chunks(text, size) {
  const out = [];
  let cur = '';
  let curBytes = 0;
  const lines = text.split(/(?<=\n)/);
  for (const line of lines) {
    const n = Buffer.byteLength(line, 'utf8');
    if (curBytes > 0 && curBytes + n > size) {
      out.push(cur);
      cur = '';
      curBytes = 0;
    }
    cur += line;
    curBytes += n;
  }
  if (curBytes > 0) out.push(cur);
  return out;
}

(async () => {
  const tok = load('qwen3');
  for (const file of files) {
    const text = fs.readFileSync(file, 'utf8');
    const parts = chunks(text, chunk);
    const bytes = Buffer.byteLength(text, 'utf8');
    let tokens = 0;
    for (const p of parts) tokens += (await tok.encode(p, null, { addSpecialTokens: false })).getLength();
    let passes = 0;
    const t0 = process.hrtime.bigint();
    let el = 0;
    while (el < minS) {
      for (const p of parts) await tok.encode(p, null, { addSpecialTokens: false });
      passes++;
      el = Number(process.hrtime.bigint() - t0) / 1e9;
    }
    const s = el / passes;
    console.log(JSON.stringify({ file, bytes, tokens, chunks: parts.length, s_per_pass: s, mb_s: bytes / s / 1e6 }));
  }
})();
