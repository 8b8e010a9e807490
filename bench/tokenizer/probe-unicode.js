// probe-unicode.js asks the Hugging Face tokenizers library itself (the npm
// binding) how it classifies every code point, and writes what it saw:
//
//   L lo hi          code points its regex engine matches with \p{L}
//   N lo hi          ... with \p{N}
//   S lo hi          ... with \s
//   K cp             non-zero canonical combining class in its NFC tables
//   D cp d1 d2 ...   its full canonical decomposition of cp (not Hangul)
//   C a b c          its NFC composes a followed by b into c
//   F x cp           (?i) in the Qwen2 contractions matches cp where x is written
//
// Usage (from the repository root, with tokenizers@0.23.2 installed where
// node finds it, e.g. NODE_PATH=/tmp/tkgold/node_modules):
//   node bench/tokenizer/probe-unicode.js > internal/tokenizer/testdata/unicode/tokenizers-0.23.2.txt
// then `go generate ./internal/tokenizer` turns it into tables_gen.go.
'use strict';
const tk = require('tokenizers');

const version = require('tokenizers/package.json').version;
const qwen2 =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// A tokenizer whose only job is its pre-tokenizer: Split(regex, behavior).
function splitter(regex, behavior) {
  const j = {
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: { type: 'Split', pattern: { Regex: regex }, behavior, invert: false },
    post_processor: null, decoder: null,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
      end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false,
      vocab: { a: 0 }, merges: [] },
  };
  return tk.Tokenizer.fromString(JSON.stringify(j)).getPreTokenizer();
}

const out = [];
const emit = (s) => out.push(s);
const hex = (cp) => cp.toString(16).toUpperCase().padStart(4, '0');
const isSurrogate = (cp) => cp >= 0xd800 && cp <= 0xdfff;

emit(`# tokenizers ${version} (npm binding), probed by bench/tokenizer/probe-unicode.js`);

// Classes: split runs of code points with the class regex, behavior Removed;
// what remains (offsets in code points) is outside the class.
const letters = [];
for (const [name, re] of [['L', '\\p{L}'], ['N', '\\p{N}'], ['S', '\\s']]) {
  const pt = splitter(re, 'Removed');
  const inClass = new Uint8Array(0x110000);
  if (name === 'L') letters.push(inClass);
  const batch = 4096;
  for (let lo = 0; lo < 0x110000; lo += batch) {
    const cps = [];
    for (let cp = lo; cp < Math.min(lo + batch, 0x110000); cp++) if (!isSurrogate(cp)) cps.push(cp);
    if (cps.length === 0) continue;
    const s = String.fromCodePoint(...cps);
    for (const cp of cps) inClass[cp] = 1;
    for (const [, [a, b]] of pt.preTokenizeString(s)) for (let k = a; k < b; k++) inClass[cps[k]] = 0;
  }
  let start = -1;
  for (let cp = 0; cp <= 0x110000; cp++) {
    const v = cp < 0x110000 ? inClass[cp] : 0;
    if (v && start < 0) start = cp;
    if (!v && start >= 0) { emit(`${name} ${hex(start)} ${hex(cp - 1)}`); start = -1; }
  }
}

// NFC tables.
const nfd = tk.nfdNormalizer();
const nfc = tk.nfcNormalizer();
const cpsOf = (s) => Array.from(s, (c) => c.codePointAt(0));
for (let cp = 0; cp < 0x110000; cp++) {
  if (isSurrogate(cp)) continue;
  const c = String.fromCodePoint(cp);
  const d = nfd.normalizeString(c);
  if (d !== c) {
    if (cp >= 0xac00 && cp <= 0xd7a3) continue; // Hangul: algorithmic
    emit(`D ${hex(cp)} ${cpsOf(d).map(hex).join(' ')}`);
    if (nfc.normalizeString(c) === c) {
      const ds = cpsOf(d);
      const first = cpsOf(nfc.normalizeString(String.fromCodePoint(...ds.slice(0, -1))));
      const second = ds[ds.length - 1];
      if (first.length !== 1 || nfc.normalizeString(String.fromCodePoint(first[0], second)) !== c) {
        throw new Error(`composite U+${hex(cp)}: no pair found`);
      }
      emit(`C ${hex(first[0])} ${hex(second)} ${hex(cp)}`);
    }
    continue;
  }
  // Non-zero combining class: reordered against U+0334 (class 1) or U+05B0 (class 10).
  if (nfd.normalizeString(c + '\u0334') === '\u0334' + c || nfd.normalizeString('\u05B0' + c) === c + '\u05B0') {
    emit(`K ${hex(cp)}`);
  }
}

// Contractions under (?i): which letters stand for each contraction letter
// (only letters can: a non-letter after the apostrophe is punctuation).
const pt = splitter(qwen2, 'Isolated');
const first = (s) => pt.preTokenizeString(s)[0][0];
for (let cp = 0; cp < 0x110000; cp++) {
  if (!letters[0][cp]) continue;
  const c = String.fromCodePoint(cp);
  if (first(`'${c}a`) === `'${c}`) emit(`F ${classify1(c)} ${hex(cp)}`);
  for (const [x, y] of [['r', 'e'], ['v', 'e'], ['l', 'l']]) {
    if (first(`'${c}${y}a`) === `'${c}${y}`) emit(`F ${x} ${hex(cp)}`);
    if (c !== y && first(`'${x}${c}a`) === `'${x}${c}`) emit(`F ${y} ${hex(cp)}`);
  }
}
// classify1 names the one-letter contraction c matched: s, t, m or d.
function classify1(c) {
  for (const x of ['s', 't', 'm', 'd']) {
    const probe = splitter(`(?i:'${x})`, 'Removed');
    if (probe.preTokenizeString(`'${c}`).length === 0) return x;
  }
  return '?';
}

process.stdout.write(out.join('\n') + '\n');
