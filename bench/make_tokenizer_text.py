#!/usr/bin/env python3
"""Deterministic input for bench/run-tokenizer.sh: ~10 MB of mixed-language
text as JSONL chunks of about 4 kB ({"text": ...} per line), and one 4 kB
JSON caption of the kind Cosmos3 prompts are (caption.txt).

The material is fixed data of the repository, so every run of every checkout
tokenizes the same bytes: the Qwen3 golden texts (20 categories: many
scripts, emoji, code, JSON captions, whitespace runs) and, for English
prose, the Apache License text kept beside them; the golden texts that hold
non-ASCII characters are drawn as often as the rest, lines with a fixed
seed (the script prints the share of non-ASCII bytes).

usage: make_tokenizer_text.py REPO_ROOT OUT_DIR [MEGABYTES]
"""
import json
import os
import random
import sys

root, out = sys.argv[1], sys.argv[2]
target = int(float(sys.argv[3]) * 1e6) if len(sys.argv) > 3 else 10_000_000
golden = os.path.join(root, "tests/data/golden/qwen3-tokenizer")

golden_texts = [json.loads(l)["text"] for l in open(os.path.join(golden, "encode.jsonl"), encoding="utf-8")]
prompts = [json.loads(l) for l in open(os.path.join(golden, "prompts.jsonl"), encoding="utf-8")]
golden_texts += [p["prompt"] for p in prompts] + [p["negative_prompt"] for p in prompts if p["negative_prompt"]]
non_ascii = [t for t in golden_texts if any(ord(c) > 0x7F for c in t)]
licence = open(os.path.join(golden, "text_tokenizer", "LICENSE"), encoding="utf-8").read()
prose = [line.strip() for line in licence.split("\n") if line.strip()]

rng = random.Random(20240611)
chunks, total = [], 0
while total < target:
    parts, size = [], 0
    while size < 4000:
        r = rng.random()
        source = non_ascii if r < 0.35 else golden_texts if r < 0.7 else prose
        piece = rng.choice(source)
        parts.append(piece)
        size += len(piece.encode("utf-8")) + 1
    text = "\n".join(parts)
    chunks.append(text)
    total += len(text.encode("utf-8"))

os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "text.jsonl"), "w", encoding="utf-8") as f:
    for text in chunks:
        f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")

# One caption of about 4 kB: the golden JSON captions' fields, merged.
caption = {}
for p in prompts:
    if not p["prompt"].startswith("{"):
        continue
    for key, value in json.loads(p["prompt"]).items():
        name = key
        while name in caption:
            name += "_"
        caption[name] = value
        if len(json.dumps(caption, ensure_ascii=False).encode("utf-8")) >= 4096:
            break
    else:
        continue
    break
text = json.dumps(caption, ensure_ascii=False)
while len(text.encode("utf-8")) > 4096:
    caption.popitem()
    text = json.dumps(caption, ensure_ascii=False)
# Top it up to 4096 bytes with a note cut from a golden mixed-script text.
filler = next(t for t in golden_texts if len(t) > 3000)
caption["note"] = ""
for ch in filler:
    caption["note"] += ch
    if len(json.dumps(caption, ensure_ascii=False).encode("utf-8")) > 4096:
        caption["note"] = caption["note"][:-1]
        break
text = json.dumps(caption, ensure_ascii=False)
open(os.path.join(out, "caption.txt"), "w", encoding="utf-8").write(text)

ascii_bytes = sum(sum(1 for b in t.encode("utf-8") if b < 0x80) for t in chunks)
print(json.dumps({"chunks": len(chunks), "bytes": total, "non_ascii_fraction": round(1 - ascii_bytes / total, 3),
                  "caption_bytes": len(text.encode("utf-8"))}))
