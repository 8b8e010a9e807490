// golden.js reads JSON Lines {"text": ...} on stdin and writes, per line,
// the ids Hugging Face's tokenizers library gives in every variant of lib.js
// (no special tokens added) and its NFC of the text:
//   {"qwen3": [...], "qwen2.5": [...], "llama3": [...], "gpt2": [...], "nfc": "..."}
//
//   node bench/tokenizer/golden.js < internal/tokenizer/testdata/corpus.jsonl \
//     > internal/tokenizer/testdata/golden.jsonl
'use strict';
const readline = require('readline');
const { tk, load, variants } = require('./lib.js');

const toks = Object.fromEntries(variants.map((v) => [v, load(v)]));
const nfc = tk.nfcNormalizer();

(async () => {
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  const out = [];
  for await (const line of rl) {
    if (line.trim() === '') continue;
    const { text } = JSON.parse(line);
    const rec = {};
    for (const v of variants) {
      const e = await toks[v].encode(text, null, { addSpecialTokens: false });
      rec[v] = e.getIds();
    }
    rec.nfc = nfc.normalizeString(text);
    out.push(JSON.stringify(rec));
  }
  process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
})();
