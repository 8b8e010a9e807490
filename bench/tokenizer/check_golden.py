"""check_golden.py encodes the committed corpus with Hugging Face's tokenizers
(the Python binding) in the variants of lib.js and compares with the committed
golden ids, which the npm binding made: two bindings of one library, one answer.

    python3 bench/tokenizer/check_golden.py
"""
import copy
import gzip
import json
import os
import sys

import tokenizers
from tokenizers import Tokenizer, normalizers

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..")
base = json.loads(gzip.open(os.path.join(root, "internal/tokenizer/qwen3/tokenizer.json.gz")).read())
llama3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def variant(name):
    j = copy.deepcopy(base)
    if name == "qwen2.5":
        drop = {"<think>", "</think>", "<tool_response>", "</tool_response>"}
        j["added_tokens"] = [a for a in j["added_tokens"] if a["content"] not in drop]
    elif name == "llama3":
        j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = llama3
        j["model"]["ignore_merges"] = True
    elif name == "normalized":
        for a in j["added_tokens"]:
            a["normalized"] = True
        extra = dict(single_word=False, lstrip=False, rstrip=False, special=False)
        j["added_tokens"].append(dict(id=151669, content="\u00e9t\u00e9", normalized=True, **extra))
        j["added_tokens"].append(dict(id=151670, content="n\u0303", normalized=False, **extra))
    elif name == "gpt2":
        j["normalizer"] = None
        j["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return Tokenizer.from_str(json.dumps(j))


names = ["qwen3", "qwen2.5", "llama3", "gpt2", "normalized"]
toks = {n: variant(n) for n in names}
nfc = normalizers.NFC()
corpus = [json.loads(l) for l in open(os.path.join(root, "internal/tokenizer/testdata/corpus.jsonl"), encoding="utf-8")]
golden = [json.loads(l) for l in open(os.path.join(root, "internal/tokenizer/testdata/golden.jsonl"), encoding="utf-8")]
bad = 0
for c, g in zip(corpus, golden):
    for n in names:
        ids = toks[n].encode(c["text"], add_special_tokens=False).ids
        if ids != g[n]:
            bad += 1
            if bad < 10:
                print(f"{n} {c['name']}: {ids} != {g[n]}", file=sys.stderr)
    if nfc.normalize_str(c["text"]) != g["nfc"]:
        bad += 1
print(json.dumps({"tokenizers": tokenizers.__version__, "texts": len(corpus), "variants": len(names), "differences": bad}))
sys.exit(1 if bad else 0)
