// lib.js loads the embedded Qwen3 tokenizer.json (the gzip committed in
// internal/tokenizer/qwen3) into Hugging Face's tokenizers library, in the
// variants the Go tests compare against.
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const tk = require('tokenizers');

const gz = path.join(__dirname, '..', '..', 'internal', 'tokenizer', 'qwen3', 'tokenizer.json.gz');

const llama3 =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// variantJSON returns the tokenizer.json object of a variant:
//   qwen3   the file as is
//   qwen2.5 less <think>, </think>, <tool_response>, </tool_response>
//   llama3  the Llama 3 split regex and ignore_merges, Qwen's vocabulary
//   gpt2    no normalizer, ByteLevel with the GPT-2 regex, Qwen's vocabulary
//   normalized  added tokens matched after NFC (normalized: true), plus "été"
//           (normalized) and "n" + U+0303 (raw, which NFC would compose)
function variantJSON(variant) {
  const j = JSON.parse(zlib.gunzipSync(fs.readFileSync(gz)).toString('utf8'));
  switch (variant) {
    case 'qwen3':
      break;
    case 'qwen2.5': {
      const drop = new Set(['<think>', '</think>', '<tool_response>', '</tool_response>']);
      j.added_tokens = j.added_tokens.filter((a) => !drop.has(a.content));
      break;
    }
    case 'llama3':
      j.pre_tokenizer.pretokenizers[0].pattern.Regex = llama3;
      j.model.ignore_merges = true;
      break;
    case 'normalized':
      for (const a of j.added_tokens) a.normalized = true;
      j.added_tokens.push({ id: 151669, content: '\u00e9t\u00e9', single_word: false, lstrip: false, rstrip: false, normalized: true, special: false });
      j.added_tokens.push({ id: 151670, content: 'n\u0303', single_word: false, lstrip: false, rstrip: false, normalized: false, special: false });
      break;
    case 'gpt2':
      j.normalizer = null;
      j.pre_tokenizer = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
      break;
    default:
      throw new Error(`unknown variant ${variant}`);
  }
  return j;
}

const variants = ['qwen3', 'qwen2.5', 'llama3', 'gpt2', 'normalized'];

function load(variant) {
  return tk.Tokenizer.fromString(JSON.stringify(variantJSON(variant)));
}

module.exports = { tk, load, variants, variantJSON };
