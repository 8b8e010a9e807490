// make-corpus.js writes the tokenizer test corpus as JSON Lines
// {"name": ..., "text": ...} (plus "ids" where the text is the library's
// decoding of them): prose in many scripts, code, white-space runs
// of every kind, contractions in any case, digit runs, CJK, emoji sequences,
// combining marks, added tokens inside text, code points where Go's Unicode
// tables and the library's differ, random code points, and text decoded from
// random ids (what a random-weight model emits). Seeded: the same output on
// every run.
//
//   node bench/tokenizer/make-corpus.js > internal/tokenizer/testdata/corpus.jsonl
'use strict';
const { load } = require('./lib.js');

let seed = 0x5eed1234;
function rand() {
  // mulberry32
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

const out = [];
const add = (name, text, ids) => out.push(JSON.stringify(ids ? { name, text, ids } : { name, text }));

const prose = {
  en: "The quick brown fox jumps over the lazy dog. It's 3:45 p.m. on 2026-11-30, and we've measured 1,519.3 tok/s — not bad!",
  de: 'Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich. Straße, Maß, Fußgängerübergänge.',
  fr: "L'été dernier, où êtes-vous allés ? « Ça dépend », répondit-elle. Œuvre, cœur, naïve, Noël.",
  es: '¿Dónde está la biblioteca? ¡Mañana será otro día! El niño comió piña y jalapeños.',
  pt: 'Não há ação sem reação; a canção é do coração. Avó, avô, pão, irmãs.',
  tr: 'İstanbul’da ılık bir akşam; ŞİŞLİ, ığdır, Çağlayan, Gümüşhane.',
  pl: 'Zażółć gęślą jaźń. Źdźbło, łódź, Świętokrzyskie.',
  ru: 'Съешь же ещё этих мягких французских булок, да выпей чаю. Ёлка, объём.',
  uk: 'Чуєш їх, доцю, га? Кумедна ж ти, прощайся без ґольфів!',
  el: 'Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Ἀρχὴ ἥμισυ παντός. ΐ ΰ ῷ',
  ar: 'نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر ومغلف بجلد أزرق. ١٢٣٤٥٦٧٨٩٠',
  fa: 'در این روزها هوا سرد است؛ ۱۲۳۴ کتاب خواندم.',
  he: 'דג סקרן שט בים מאוכזב ולפתע מצא חברה. שָׁלוֹם עֲלֵיכֶם',
  hi: 'ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम। १२३४',
  bn: 'আমি বাংলায় গান গাই। ০১২৩৪৫৬৭৮৯',
  ta: 'யாமறிந்த மொழிகளிலே தமிழ்மொழி போல் இனிதாவது எங்கும் காணோம்.',
  te: 'తెలుగు భాష చాలా అందమైనది. ౦౧౨౩',
  th: 'เป็นมนุษย์สุดประเสริฐเลิศคุณค่า กว่าบรรดาฝูงสัตว์เดรัจฉาน ๑๒๓',
  lo: 'ພາສາລາວ ແມ່ນພາສາທີ່ງາມ',
  my: 'မြန်မာဘာသာစကား ၁၂၃',
  km: 'ភាសាខ្មែរ គឺជាភាសាកំណើតរបស់ជនជាតិខ្មែរ',
  ka: 'ქართული ენა ლამაზია. ႠႡႢ',
  hy: 'Հայերեն լեզուն գեղեցիկ է։',
  am: 'ሰማይ አይታረስ ንጉሥ አይከሰስ። ፩፪፫',
  si: 'සිංහල භාෂාව ඉතා ලස්සනයි.',
  vi: 'Tiếng Việt có dấu: Trăm năm trong cõi người ta, chữ tài chữ mệnh khéo là ghét nhau.',
  zh: '我能吞下玻璃而不伤身体。人工智能正在改变世界，大型语言模型的推理服务需要仔细评估。',
  zhTW: '我能吞下玻璃而不傷身體。繁體中文測試：臺灣、香港。',
  ja: 'いろはにほへと ちりぬるを。私はガラスを食べられます。それは私を傷つけません。カタカナ、ｶﾀｶﾅ。',
  ko: '나는 유리를 먹을 수 있어요. 그래도 아프지 않아요. 한국어 토크나이저 테스트입니다.',
  mn: 'Монгол хэл ᠮᠣᠩᠭᠣᠯ',
  bo: 'བོད་ཡིག་ནི་སྐད་ཡིག་ཅིག་ཡིན།',
  yi: 'ייִדיש איז אַ שפּראַך',
  cherokee: 'ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ',
  ethiopic: 'ግዕዝ ቋንቋ',
  math: '∀x∈ℝ: x² ≥ 0; ∑ᵢ aᵢ = ∫₀^∞ f(t) dt ≈ 3.14159… ≠ ∞ ⊕ ⊗ ℵ₀ 𝔸𝔹ℂ 𝒜𝓑',
  latinExt: 'ǅ ǈ ǋ ǲ ß ẞ ſ ﬁ ﬂ Ⅻ ⅻ ½ ¾ ² ³ ⁹ ① ⑴ ⒈',
};
for (const [k, v] of Object.entries(prose)) {
  add(`prose/${k}`, v);
  add(`prose/${k}/lines`, v.split(' ').join('\n'));
}
add('prose/all', Object.values(prose).join('\n\n'));

const code = {
  go: 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfor i := 0; i < 10; i++ {\n\t\tfmt.Printf("%d: %q\\n", i, "héllo")\n\t}\n}\n',
  python: 'def f(x: int) -> int:\n    """Docstring."""\n    if x <= 1:\n        return 1\n    return x * f(x - 1)  # recursion\n\n\nprint(f(10))\r\n',
  json: '{\n  "schema": "rehearse/results/v1",\n  "records": [{"ok": true, "ttft_s": 0.033, "text": "Hi\\n"}],\n  "n": -12.5e-3\n}',
  js: "const x = (a, b) => a ?? b; // it's fine\nlet s = `template ${x}`;\nif (s !== '') { console.log(s); }\n",
  shell: '#!/usr/bin/env bash\nset -euo pipefail\nfor f in *.txt; do echo "$f" | tr a-z A-Z >> out.log 2>&1; done\n',
  html: '<!DOCTYPE html>\n<html><body><p class="x">Hello &amp; bye</p><br/></body></html>',
  sql: "SELECT id, name FROM users WHERE email LIKE '%@example.com' AND created_at > NOW() - INTERVAL '7 days';",
  rust: 'fn main() {\n    let v: Vec<u32> = (0..100).filter(|x| x % 3 == 0).collect();\n    println!("{:?}", v);\n}\n',
  yaml: 'servers:\n  - name: vllm\n    launch_argv: ["vllm", "serve", "Qwen/Qwen2.5-1.5B-Instruct"]\n    port: 8000\n',
  c: '#include <stdio.h>\nint main(void){char*s="a\\tb";while(*s)putchar(*s++);return 0;}\n',
  minified: 'function a(b){return b.map(c=>c*2).filter(d=>d>3).reduce((e,f)=>e+f,0)}var g=a([1,2,3,4]);',
  markdown: '# Title\n\n- item **bold** _it_\n- `code`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```go\nx := 1\n```\n',
};
for (const [k, v] of Object.entries(code)) add(`code/${k}`, v);

// White space: every sequence of up to three units from this set, alone
// and between words.
const ws = [' ', '  ', '\t', '\n', '\r\n', '\r', '\u00a0', '\u3000', '\u2003', '\u000b', '\u000c', '\u0085', '\u2028'];
for (const a of ws) {
  for (const b of ws) {
    add('ws/pair', a + b);
    add('ws/pair-words', `x${a}${b}y`);
    add('ws/pair-end', `word${a}${b}`);
    add('ws/pair-start', `${a}${b}word`);
    add('ws/pair-punct', `.${a}${b}!`);
    add('ws/pair-digit', `1${a}${b}2`);
  }
}
for (let i = 0; i < 200; i++) {
  let s = '';
  const n = int(1, 12);
  for (let k = 0; k < n; k++) s += pick([...ws, 'a', 'Bc', '7', '!', '(', "'", '中', 'é']);
  add('ws/random', s);
}
add('ws/long-spaces', ' '.repeat(300) + 'x' + ' '.repeat(301));
add('ws/long-newlines', '\n'.repeat(100) + 'x' + '\r\n'.repeat(50));
add('ws/tabs', '\t\t\tindented\n\t\t\t\n\t  mixed \t \n');

// Contractions in any case, ſ included.
const conts = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"];
for (const c of conts) {
  const variants = new Set([c, c.toUpperCase(), c[0] + c.slice(1, 2).toUpperCase() + c.slice(2)]);
  if (c.length === 3) variants.add(c.slice(0, 2) + c[2].toUpperCase());
  for (const v of variants) {
    add('contraction', `it${v} here`);
    add('contraction/bare', v);
    add('contraction/glued', `x${v}y`);
    add('contraction/space', ` ${v}`);
    add('contraction/digit', `9${v}9`);
  }
}
add('contraction/long-s', "it'ſ, IT'ſ, 'ſ, ſ's");
add('contraction/mixed', "I'M YOU'RE WE'VE THEY'LL HE'D SHE'S DON'T i'M you'Re we'vE they'Ll");
add('contraction/quotes', "'tis 'twas ''s '''re rock'n'roll o'clock ’s ’re");

// Digits.
for (const d of ['0', '12', '123', '1234', '12345', '3.14159', '1,000,000', '-42', '1e-9', '٣٤٥', '১২৩', '໑໒', '①②③', 'Ⅻ', '²³']) {
  add('digits', d);
  add('digits/words', `abc${d}def ${d} x`);
}
add('digits/long', '9'.repeat(257));
add('digits/mixed', '0x1F 0b1010 0o17 1_000_000 v1.2.3-rc.4 2026-11-30T13:09:00Z');

// Emoji.
const emoji = ['😀', '👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇩🇪', '🇯🇵', '❤️', '🧑🏿‍💻', '👩🏻‍❤️‍💋‍👨🏼', '#️⃣', '©️', '🫠', '🪿'];
for (const e of emoji) {
  add('emoji', e);
  add('emoji/words', `hi ${e} there${e}${e}!`);
}
add('emoji/run', emoji.join(''));

// Combining marks that NFC composes or reorders, Hangul jamo, long runs.
const marks = [
  'e\u0301', 'E\u0301', 'a\u030a', 'o\u0308\u0304', 'a\u0323\u0302', 'a\u0302\u0323', 'q\u0307\u0323',
  'ṩ', 's\u0323\u0307', 's\u0307\u0323', '\u1100\u1161', '\u1100\u1161\u11a8', '\uac00\u11a8',
  '\u1112\u1161\u11ab\u1100\u1173\u11af', 'A\u030a\u0301', '\u212b', '\u2126', '\u0344', '\u0f73', '\u0958',
  'ﬁ', '\u00c5\u0316', 'e\u0301\u0301\u0301', '\u0301start', 'x\u0336\u0301', 'ç\u0327',
  '\u05d1\u05bc\u05b0', '\u0915\u093c', '\u09c7\u09be', '\u0b47\u0b3e', '\u1025\u102e', 'Ǆ',
  'e' + '\u0301'.repeat(40), 'a' + '\u0300\u0316'.repeat(20), 'a' + '\u0334'.repeat(35) + '\u0301',
  'a\u1dfa\u0301', 'a\u0301\u1dfa', 'a\u0301\u1ac1', 'a\u1ac1\u0316', // marks from Unicode 10+
  '\u0061\u0306\u0301', 'ặ', 'ế', 'ﬃ', 'Å', 'Ω',
];
for (const m of marks) {
  add('nfc', m);
  add('nfc/words', `x ${m} y${m}z`);
  add('nfc/nfd', m.normalize('NFD'));
}
add('nfc/vietnamese-nfd', 'Tiếng Việt có dấu: Trăm năm trong cõi người ta'.normalize('NFD'));
add('nfc/korean-nfd', '한국어 토크나이저 테스트입니다'.normalize('NFD'));

// Added tokens inside text.
for (const s of [
  '<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n',
  '<think>\nLet me think.\n</think>\n\nAnswer: 42',
  '<tool_call>{"name": "f"}</tool_call><tool_response>ok</tool_response>',
  '<<think>> <think<think> </think></think> <thin k> <|endoftext|><|endoftext|>',
  'x<|im_end|>y <|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>',
  '<|vision_start|><|image_pad|><|vision_end|> <|box_start|>(1,2)<|box_end|>',
  '<|im_start', 'im_end|>', '<|', '|>', '<think', '</think', 'think>',
  'é<think>é</think>é', 'e<think>\u0301', ' <think> ', '\n<think>\n',
  'été', 'e\u0301te\u0301', 'L\'été, l\'e\u0301te\u0301', 'ééété', 'n\u0303', 'ñ', 'an\u0303o año', 'n\u0303\u0301',
]) {
  add('added', s);
}

// Code points where Go's Unicode 15 tables and the library's differ, and
// random code points from every plane.
const assigned = [];
for (const [lo, hi] of [
  [0x0020, 0x2fff], [0x3000, 0x9fff], [0xa000, 0xd7ff], [0xf900, 0xffff], [0x10000, 0x1ffff],
  [0x20000, 0x2ffff], [0x30000, 0x323af], [0xe0000, 0xe01ef],
]) assigned.push([lo, hi]);
for (let i = 0; i < 300; i++) {
  const [lo, hi] = pick(assigned);
  const n = int(1, 24);
  const cps = [];
  for (let k = 0; k < n; k++) cps.push(int(lo, Math.min(hi, lo + 0x3ff + Math.floor(rand() * (hi - lo)))));
  add('random/codepoints', String.fromCodePoint(...cps));
}
// Letters and digits new since Unicode 15 (Go's tables) through 16.
const newer = [
  [0x10d40, 0x10d8f], [0x10ec2, 0x10ec4], [0x11380, 0x113e2], [0x116d0, 0x116e3], [0x11bc0, 0x11be1],
  [0x11f5a, 0x11f5a], [0x13460, 0x143fa], [0x16100, 0x16139], [0x16d40, 0x16d79], [0x1ccf0, 0x1ccf9],
  [0x1e5d0, 0x1e5fa], [0x2ebf0, 0x2ee5d], [0x31350, 0x323af], [0x1c89, 0x1c8a], [0xa7cb, 0xa7dc],
  [0x0897, 0x0897], [0x1b4e, 0x1b4f], [0x10d4a, 0x10d65], [0x11b00, 0x11b09],
];
for (const [lo, hi] of newer) {
  const cps = [];
  for (let cp = lo; cp <= hi && cps.length < 64; cp += Math.max(1, Math.floor((hi - lo) / 48))) cps.push(cp);
  const s = String.fromCodePoint(...cps);
  add('unicode16', s);
  add('unicode16/words', `a ${s} 1${String.fromCodePoint(lo)}x ${String.fromCodePoint(hi)}`);
}

// Text decoded from random ids, as a random-weight model emits it; the ids
// are kept, so Decode is checked against the library too.
const qwen = load('qwen3');
(async () => {
  for (let i = 0; i < 300; i++) {
    const n = int(1, 160);
    const ids = [];
    for (let k = 0; k < n; k++) ids.push(rand() < 0.02 ? int(151643, 151668) : int(0, 151642));
    add('random/ids', await qwen.decode(ids, false), ids);
  }
  process.stdout.write(out.join('\n') + '\n');
})();
