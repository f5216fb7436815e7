#!/usr/bin/env python3
"""Differential check of stepmix's tokenizer against @huggingface/tokenizers, for
bench/run-tokenizer-differential.sh: seeded adversarial inputs per category, encoded or
decoded on both sides, and every disagreement put in one of two classes:
- unicode-skew: the input holds code points whose tokenizer-relevant properties
  (General_Category L*/N*, White_Space, canonical combining class, NFD/NFC, composition)
  differ between the reference's Unicode (Node's ICU, asked at run time) and Unicode 14
  (this Python's unicodedata; stepmix's regex classes come from Oniguruma 6.9.8, Unicode
  14, its NFC from utf8proc 2.8, Unicode 15), AND the input without them gets the same
  answer on both sides;
- other: bugs to act on; the first few of each category are shrunk and printed.
usage: tokenizer_differential.py --stepmix BIN --peer PEER_MJS --tokenizer DIR --work DIR
         --json OUT [--strings N] [--seed S] [--show K]
exit status 1 on any "other" mismatch, 2 when the setup is broken
"""
import argparse, json, os, random, subprocess, sys, time, unicodedata
import check_report  # bench/check_report.py, next to this script
from check_report import setup_error

# The skew classes compare the reference's Unicode with this interpreter's tables, which must be
# Unicode 14, the version of stepmix's regex classes (Debian 12's Oniguruma 6.9.8).
BASELINE_UNICODE = "14.0.0"

# ---- Unicode: what the two sides may legitimately disagree on ------------------------

class UnicodeSkew:
    """The code points whose properties that the Qwen3 tokenizer depends on (its NFC
    normalizer; its split regex of \\p{L}, \\p{N} and \\s) differ between the reference's
    Unicode (`ucd`, from the peer) and Unicode 14 (this Python's unicodedata)."""

    def __init__(self, ucd):
        category = {}
        for name, ranges in ucd["ranges"].items():
            for lo, hi in ranges:
                category.update(dict.fromkeys(range(lo, hi + 1), name))
        white = set(ucd["white"])
        nfd = {int(k): v for k, v in ucd["nfd"].items()}
        nfc = {int(k): v for k, v in ucd["nfc"].items()}
        # The peer gives the non-starters as groups of equal ccc in ascending order; a
        # group's value is the one Unicode 14 gives its old members (ccc values never
        # change, by Unicode policy); a group without old members has a new class: -1.
        ccc, last = {}, 0
        for group in ucd["ccc_groups"]:
            known = {unicodedata.combining(chr(cp)) for cp in group} - {0}
            if len(known) > 1 or (known and min(known) <= last):
                setup_error(f"Node's canonical ordering does not match Unicode 14's classes at {group[:5]}")
            value = known.pop() if known else -1
            last = max(last, value)
            ccc.update(dict.fromkeys(group, value))
        node = lambda cp: (major(category[cp]), cp in white, None if cp in nfd else ccc.get(cp, 0),
                           nfd.get(cp, chr(cp)), nfc.get(cp, chr(cp)))
        self.code_points = {cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and node(cp) != unicode14(cp)}
        # A new decomposition makes its parts compose, though each part alone may look the
        # same in both versions (U+1611E twice is U+16121 from Unicode 16 on): its parts
        # are skew where the input holds all of them.
        decompositions = ((nfd.get(cp, chr(cp)), unicodedata.normalize("NFD", chr(cp))) for cp in self.code_points)
        self.compositions = {frozenset(map(ord, d)) for pair in decompositions if pair[0] != pair[1]
                             for d in pair if len(d) > 1}

    def within(self, text):
        present = {ord(c) for c in text}
        return (present & self.code_points).union(*(parts for parts in self.compositions if parts <= present))

    def without(self, text):
        skew = self.within(text)
        return "".join(c for c in text if ord(c) not in skew)

def major(category):
    return category[0] if category[0] in "LN" else "-"

def unicode14(cp):
    c = chr(cp)
    nfd = unicodedata.normalize("NFD", c)
    # Python has no White_Space; str.isspace() is White_Space plus U+001C..U+001F.
    return (major(unicodedata.category(c)), c.isspace() and not 0x1C <= cp <= 0x1F,
            unicodedata.combining(c) if nfd == c else None, nfd, unicodedata.normalize("NFC", c))

# ---- Input generators, one per category -----------------------------------------------

def hexes(s): return [int(x, 16) for x in s.split()]

PUNCT, DIGITS = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "0123456789"
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
WORDS = ("the The robot walks arm café naïve über straße I you don can won it he she they we hello HELLO x a Zoë "
         "İstanbul ı Ångström video frame 24fps 1080p 機器人 ロボット 로봇 روبوت หุ่นยนต์ रोबोट Робот ρομπότ").split()
BLANKS = [" ", "  ", "\t", "\r", "\n", "\r\n", "\n\n", "\r\r", " \n", "\n ", " \r\n ", "\t\n", "\ufeff", "\u200b"]
NOT_WHITE = hexes("B C 1C 1D 1E 1F 180E 200B 200C 200D 2060 FEFF 85")
# The contractions match case-insensitively, so case folding matters (long s, Kelvin sign, dotted I,
# sharp s, fullwidth s), and so do look-alikes of the apostrophe.
CONTRACTIONS = ("'s 'S 't 'T 're 'RE 'Re 'rE 've 'VE 'Ve 'm 'M 'll 'LL 'Ll 'lL 'd 'D \u2019s \u2019S \u2019ll "
                "\u2019LL \u2019re ' '' ''' 'x 'st 'sa 'lls 'rex 'dd '1 `s '\u017f '\u212a '\u0130 '\u00df '\u1e9e "
                "'\uff53 's\u0301 's\u0307 'l\u0323l '\u00e9 '\u03c3 \u02bcs \uff07s").split() + ["' s", "'\n"]
NUM_SPECIAL = hexes("660 669 6F0 966 96F FF10 FF19 B2 B3 B9 BC BD BE 2070 2074 2080 2089 2150 215F 2160 216B 2170 "
                    "217F 2180 2188 2460 2473 2776 3007 3021 3038 1D7CE 1D7FF 1F100 1F10A 10107 12400 1E950 A8D0 "
                    "1040 E50 F20 17E0 19DA 2CFD 3192 3220 3280 32B1")
# Singletons, composition exclusions, compatibility ideographs: NFC changes them.
SINGLETONS = hexes("212B 212A 2126 340 341 343 344 374 37E 387 1F71 1FEE 2000 2001 2329 232A F900 FA0D FA10 FA6D "
                   "FA70 FAD9 2F800 2FA1D 958 95F 9DC A33 F43 F73 F75 F81 FB1D FB1F FB2A FB4E 2ADC 1D15E 1D164 "
                   "1D1BB CC0 DDA 1B06 110AB 1133B 11347 114BB")
BASES = "aeiouAEIOUcnyszgkCNYSZGKwWxαεηιουωΑЕиИгاويאשकকகಕകෙဥᬅうかハホ"
# Marks of many classes, including second halves of compositions (U+0CD5, U+0DCF, U+3099, ...).
MARKS = hexes("300 301 302 303 304 306 307 308 30A 30B 30C 31B 323 324 325 327 328 32D 330 331 338 342 345 344 "
              "340 341 343 653 654 655 5B4 5BC 5C1 5C2 93C 9BE 9D7 B3E B56 B57 BBE BD7 C56 CC2 CD5 CD6 D3E D57 "
              "DCA DCF DDF 102E 1B35 3099 309A 20D2 20E3 FE0F FE0E 1D165 1D16E 34F 1AB0 1DC0 1DFF E0100 110BA "
              "1133E 11357 114B0 114BA 114BD 115AF 11930")
JAMO_L, JAMO_V, JAMO_T = [*range(0x1100, 0x1113)], [*range(0x1161, 0x1176)], [*range(0x11A8, 0x11C3)]
JAMO_OLD = [cp for lo, hi in ((0x1113, 0x115F), (0x1176, 0x11A7), (0x11C3, 0x11FF), (0xA960, 0xA97C),
                              (0xD7B0, 0xD7C6), (0xD7CB, 0xD7FB)) for cp in range(lo, hi + 1)]
EMOJI = hexes("1F600 1F44D 1F468 1F469 1F466 1F467 2764 1F525 1F916 1F3F3 1F3F4 2620 1F308 26A7 1F9D1 1F4BB "
              "1F680 2B50 263A 1FAE0 1FAF8 1F6DC 1FA87 1FABF 1F426 2B1B 1F9BA 1FAE8 1FA89 1FAEF")
SKIN, FLAGS, TAGS = [*range(0x1F3FB, 0x1F400)], [*range(0x1F1E6, 0x1F200)], [*range(0xE0020, 0xE0080)]
PRIVATE = [*range(0xE000, 0xF900), *range(0xF0000, 0xF0100), *range(0x10FF00, 0x110000)]
ODD = hexes("0 FFFE FFFF FEFF 10FFFF 10FFFE 1FFFE FDD0 FDEF E000 F8FF F0000 7F 80 9F 85 D7FF E0001 E007F 2FFFF "
            "30000 FFFD FFFC")
LONG_UNITS = ["a", "A", "z", "é", "e\u0301", "1", "0", " ", "\n", "\t", "\r\n", "\u3000", "😀", "👨\u200d👩", "一",
              "機", "ا", "ก", "क्", "ab", "ha", "-", "=", "!", ".", "'s", "\u00a0", "\U00020000", "\ufeff", "\x00",
              "\u0301", "x\u200d", "로", "\u1100\u1161", "🇺🇸", "<|", "\u2028", "\x85"]
LOREM = ("A robot arm picks up a red cube from the table and places it into a blue bin. The camera slowly pans "
         "left; sunlight flickers through the window.").split()
SCRIPTS = ["机器人在仓库里搬运箱子。一只猫在草地上奔跑，阳光明媚。", "ロボットが箱を運んでいます。", "로봇이 상자를 옮깁니다. ",
           "الروبوت يحمل الصندوق ١٢٣ ", "หุ่นยนต์กำลังเดิน ", "रोबोट बक्सा उठाता है। १२ "]
CODE = ["def f(x):\n    return x**2  # square\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\r\n}\n",
        "if __name__ == '__main__':\n    main()\n", "<div class=\"x\">it's &amp; <b>bold</b></div>",
        "SELECT * FROM t WHERE id=42;", "const s = `${a}\\n`;", "    \n\n\t\t}\n", "fn main() { println!(\"{}\", 1); }"]
BAD_UTF8 = [bytes.fromhex(x) for x in ("eda080 edbfbf c0af c1bf e080af e09fbf f08080af f08fbfbf f4908080 f580 ff "
                                       "fe e282 f09f98 f09f c3 8080 efbbbf efbfbe f48fbfbf e184 ed9fbf ee8080 00 "
                                       "c285").split()]

def pieces(r, count, table):
    """`count` pieces, each made by the first maker in table whose cumulative probability exceeds a draw."""
    return [next(make for p, make in table if k < p)(r) for k in (r.random() for _ in range(count))]

def text(r, count, table): return "".join(pieces(r, count, table))

def pick(r, pool): return chr(r.choice(pool))

def generators(ucd, skew, tokenizer):
    """{category: (make(rng) -> text or list of ids, share of --strings)}."""
    cat = {name: [cp for lo, hi in ranges for cp in range(lo, hi + 1)] for name, ranges in ucd["ranges"].items()}
    any_cat = sorted(name for name in cat if cat[name] and name != "Cs")
    nfd = {int(k): v for k, v in ucd["nfd"].items()}
    decomposable, nfc_changed = sorted(nfd), [int(k) for k in ucd["nfc"]]
    skew_list, new_parts = sorted(skew.code_points), sorted(set().union(*skew.compositions))
    blanks = BLANKS + [chr(cp) for cp in ucd["white"]]
    added, added_ids = zip(*((a["content"], a["id"]) for a in tokenizer["added_tokens"]))

    def ws_punct(r):
        s = text(r, r.randrange(1, 40), [
            (0.3, lambda r: r.choice(blanks) * r.choice([1, 1, 1, 2, 3, 7, 30])),
            (0.5, lambda r: "".join(r.choices(PUNCT, k=r.randrange(1, 5)))),
            (0.6, lambda r: "".join(r.choices(DIGITS, k=r.randrange(1, 6)))),
            (0.8, lambda r: "".join(r.choices(LETTERS, k=r.randrange(1, 8)))),
            (0.9, lambda r: r.choice(WORDS)), (1, lambda r: pick(r, NOT_WHITE + ucd["white"]))])
        if r.random() < 0.2: s += r.choice(blanks) * r.randrange(1, 50)
        if r.random() < 0.2: s = r.choice(blanks) * r.randrange(1, 50) + s
        return s

    def long_run(r):
        n, unit = r.choice([100, 255, 256, 257, 1000, 3000, 5000, 10000, r.randrange(1, 8000)]), r.choice(LONG_UNITS)
        s = unit * (n // len(unit) if r.random() < 0.7 else max(1, n // 10))
        if r.random() < 0.4: s = r.choice(["", " ", "x", "The ", "\n", "1", "<|im_start|>"]) + s
        if r.random() < 0.4: s += r.choice(["", " ", "x", " end", "\n", "!", "<|im_end|>", "  "])
        if r.random() < 0.3: s += " " + r.choice(WORDS) * r.randrange(1, 200)
        return s

    def random_scalar(r):
        """Any plane, biased to the lower ones and to odd code points."""
        span = r.choices([(0, 0x80), (0x80, 0x800), (0x800, 0x10000), (0x10000, 0x30000), (0x30000, 0x110000), None],
                         weights=[20, 15, 25, 15, 10, 15])[0]
        cp = r.randrange(*span) if span else r.choice(ODD)
        return chr(0xFFFD if 0xD800 <= cp <= 0xDFFF else cp)

    def hangul_syllable(r):
        jamo = [r.choice(JAMO_L), r.choice(JAMO_V)] + ([r.choice(JAMO_T)] if r.random() < 0.6 else [])
        if r.random() < 0.3: jamo = r.choices(JAMO_L + JAMO_V + JAMO_T + JAMO_OLD, k=r.randrange(1, 5))
        if r.random() < 0.2: jamo = [0xAC00 + r.randrange(11172), r.choice(JAMO_T + JAMO_V)]
        return "".join(map(chr, jamo))

    def decomposed(r):
        d = list(nfd[r.choice(decomposable)])
        if r.random() < 0.5: r.shuffle(d)  # marks out of canonical order
        return "".join(d)

    def emoji_zwj(r):
        return "\u200d".join(pick(r, EMOJI) + (pick(r, SKIN) if r.random() < 0.3 else "") +
                             ("\ufe0f" if r.random() < 0.3 else "") for _ in range(r.randrange(1, 5)))

    def added_piece(r):
        t, k = r.choice(added), r.random()
        if k < 0.4: return t
        if k < 0.55: return t[:r.randrange(1, len(t))]
        if k < 0.7: return t[r.randrange(1, len(t)):]
        if k < 0.85: return t.upper() if r.random() < 0.5 else t.replace("|", "\uff5c")
        return t[:-1] + pick(r, MARKS) + t[-1:] if r.random() < 0.5 else t + pick(r, MARKS)

    def realistic(r):
        k = r.random()
        if k < 0.35:
            caption = {"caption": " ".join(r.choices(LOREM, k=r.randrange(3, 40))), "fps": r.choice([24, 30, 12.5]),
                       "camera": r.choice(["static", "pan left", "dolly → in"]),
                       "lang": r.choice(SCRIPTS)[:r.randrange(1, 30)], "objects": r.choices(WORDS, k=r.randrange(6))}
            return json.dumps(caption, ensure_ascii=r.random() < 0.3, indent=r.choice([None, 2, "\t"]))
        if k < 0.6: return "".join(r.choices(CODE, k=r.randrange(1, 6)))
        if k < 0.8: return "".join(r.choice(SCRIPTS + [" ".join(LOREM[:r.randrange(1, 20)]) + " "])[:r.randrange(1, 60)]
                                   for _ in range(r.randrange(1, 8)))
        return ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n" +
                " ".join(r.choices(LOREM + WORDS, k=r.randrange(1, 60))) +
                r.choice(["", "<|vision_start|><|image_pad|><|vision_end|>", "<think>\n\n</think>\n\n"]) +
                "<|im_end|>\n<|im_start|>assistant\n")

    # Byte-level BPE: GPT-2's byte <-> character map names the id of each byte.
    byte_char = {b: chr(b) for b in [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]}
    byte_char.update({b: chr(0x100 + i) for i, b in enumerate(b for b in range(256) if b not in byte_char)})
    vocab, char_byte = tokenizer["model"]["vocab"], {c: b for b, c in byte_char.items()}
    byte_id = {b: vocab[c] for b, c in byte_char.items()}
    # Tokens that are not whole UTF-8 on their own: decoding must join them with their neighbours.
    is_utf8 = lambda data: data.decode("utf-8", "ignore").encode() == data
    partial_ids = [i for t, i in vocab.items() if not is_utf8(bytes(char_byte[c] for c in t))]
    any_id = lambda r: [r.randrange(max(added_ids) + 1)]
    ids = lambda r, count, table: [i for piece in pieces(r, count, table) for i in piece]

    return {
        "ws_punct": (ws_punct, 1),
        "contractions": (lambda r: text(r, r.randrange(1, 16), [
            (0.45, lambda r: r.choice(CONTRACTIONS)), (0.75, lambda r: r.choice(WORDS + ["DON", "CAN", "o", "O"])),
            (0.9, lambda r: r.choice([" ", "  ", "\n", "\t", "\u3000", "", "", ""])),
            (1, lambda r: r.choice(PUNCT + DIGITS))]), 1),
        "numbers": (lambda r: text(r, r.randrange(1, 30), [
            (0.35, lambda r: pick(r, NUM_SPECIAL)), (0.6, lambda r: pick(r, cat["Nd"] + cat["Nl"] + cat["No"])),
            (0.75, lambda r: r.choice(DIGITS) * r.randrange(1, 5)), (0.85, lambda r: r.choice(" .,-+%$\u00a0\u202f'/")),
            (1, lambda r: r.choice(WORDS + ["th", "km", "°C"]))]), 1),
        "nfc": (lambda r: text(r, r.randrange(1, 20), [
            (0.3, lambda r: r.choice(BASES) + "".join(pick(r, MARKS) for _ in range(r.randrange(1, 5)))),
            (0.42, hangul_syllable), (0.55, lambda r: pick(r, SINGLETONS)), (0.65, lambda r: pick(r, nfc_changed)),
            (0.75, decomposed), (0.82, lambda r: pick(r, cat["Mn"] + cat["Mc"] + cat["Me"])),
            (0.88, lambda r: pick(r, new_parts or [0x61])), (0.94, lambda r: r.choice(WORDS)),
            (1, lambda r: r.choice([" ", "\n", "'", "-", "1", "<|im_end|>"]))]), 1),
        "hangul": (lambda r: text(r, r.randrange(1, 12), [
            (0.3, lambda r: chr(0xAC00 + r.randrange(11172))),
            (0.6, lambda r: pick(r, JAMO_L + JAMO_V + JAMO_T + [0x11A7, 0x1160, 0x115F, 0x3164, 0xFFA0])),
            (0.75, lambda r: pick(r, JAMO_OLD + [*range(0x3131, 0x318F)])), (0.85, lambda r: pick(r, MARKS)),
            (1, lambda r: r.choice([" ", "x", "1", "'s", "\n", "<|im_end|>", "\u3000"]))]), 0.5),
        "emoji_misc": (lambda r: text(r, r.randrange(1, 14), [
            (0.25, emoji_zwj), (0.35, lambda r: pick(r, FLAGS) + pick(r, FLAGS)),
            (0.42, lambda r: r.choice("0123456789#*") + "\ufe0f\u20e3"),
            (0.47, lambda r: "\U0001F3F4" + "".join(pick(r, TAGS) for _ in range(r.randrange(1, 7)))),
            (0.55, lambda r: pick(r, PRIVATE)), (0.62, lambda r: pick(r, cat["Cn"])), (0.67, lambda r: pick(r, ODD)),
            (0.75, lambda r: pick(r, [*range(0x20), *range(0x7F, 0xA0)])), (0.8, lambda r: "\x00" * r.randrange(1, 3)),
            (0.87, lambda r: pick(r, cat["Cf"] + cat["Co"][:50])), (0.93, lambda r: r.choice(WORDS)),
            (1, lambda r: r.choice([" ", "  ", "\n", "\t", "'s", ".", "\ufe0e", "\ufe0f"]))]), 1),
        "added_tokens": (lambda r: text(r, r.randrange(1, 14), [
            (0.55, added_piece), (0.7, lambda r: r.choice("< > | <| |> </ << >> || <||> <|> <|im_start|>> "
                                                          "<<|im_start|> im_end|>".split())),
            (0.8, lambda r: r.choice(BASES) + pick(r, MARKS)),
            (0.9, lambda r: r.choice([" ", "  ", "\n", "\t", "\u3000", "\u00a0", "\r\n", " \n ", ""])),
            (1, lambda r: r.choice(WORDS + ["'s", "1", "system\n", "user\n", "assistant\n"]))]), 1),
        "long_runs": (long_run, 0.1),
        "random_utf8": (lambda r: "".join(random_scalar(r) for _ in range(r.randrange(1, 60))), 1),
        "by_category": (lambda r: text(r, r.randrange(1, 30), [
            (0.8, lambda r: pick(r, cat[r.choice(any_cat)])),
            (1, lambda r: r.choice(WORDS + [" ", "\n", "'s", "1"]))]), 1),
        # The code points the two Unicode versions disagree on, in context.
        "new_unicode": (lambda r: text(r, r.randrange(1, 12), [
            (0.5, lambda r: pick(r, skew_list)), (0.65, lambda r: pick(r, new_parts or skew_list)),
            (0.8, lambda r: r.choice(WORDS)),
            (1, lambda r: r.choice([" ", "'s", "1", "\n", "x", "", "\u0301"]))]), 0.5),
        "realistic": (realistic, 0.5),
        "decode": (lambda r: ids(r, r.randrange(1, 40), [
            (0.3, lambda r: [byte_id[r.randrange(0x80, 0x100)]]), (0.45, lambda r: [r.choice(added_ids)]),
            (0.55, lambda r: [byte_id[r.randrange(0x80)]]), (1, any_id)]), 1),
        "decode_bytes": (lambda r: ids(r, r.randrange(1, 25), [
            (0.4, lambda r: [byte_id[b] for b in r.choice(BAD_UTF8)]), (0.6, lambda r: [r.choice(partial_ids)]),
            (0.75, lambda r: [r.choice(added_ids)]), (0.9, lambda r: [byte_id[r.randrange(256)]]), (1, any_id)]), 1),
    }

# ---- Running both sides ---------------------------------------------------------------

def run_both(args, requests, name):
    """The answers of stepmix and of the reference to requests ({"text"} or {"ids"}), in order."""
    path = os.path.join(args.work, name)
    with open(f"{path}.in.jsonl", "w") as f:
        f.writelines(json.dumps({"id": i, **q}) + "\n" for i, q in enumerate(requests))
    with open(f"{path}.stepmix.jsonl", "w") as f:
        subprocess.run([args.stepmix, "tokenize", "--tokenizer", args.tokenizer, "--jsonl", f"{path}.in.jsonl"],
                       stdout=f, check=True)
    subprocess.run(["node", "--max-old-space-size=4096", args.peer, "run", args.tokenizer, f"{path}.in.jsonl",
                    f"{path}.reference.jsonl"], check=True)
    answers = [[json.loads(line) for line in open(f"{path}.{side}.jsonl")] for side in ("stepmix", "reference")]
    if not len(answers[0]) == len(answers[1]) == len(requests) or \
            any(a["id"] != i or b["id"] != i for i, (a, b) in enumerate(zip(*answers))):
        setup_error(f"{path}: the answers do not line up with the {len(requests)} requests")
    return list(zip(*answers))

def same(a, b):
    # A refusal (an id outside the vocabulary) counts as agreement when both refuse.
    if "error" in a or "error" in b:
        return "error" in a and "error" in b
    return all(a.get(k) == b.get(k) for k in ("ids", "text", "text_skip_special_tokens"))

def answer(a):
    return a.get("error") or a.get("ids") or {k: a[k] for k in ("text", "text_skip_special_tokens")}

def minimise(args, requests):
    """Shrinks each mismatching request (its text or ids) by batched delta debugging: each
    round tries, for every request, dropping each chunk of sizes halving down to a floor,
    all in one run of both sides, and keeps the shortest candidate that still mismatches;
    when none does, the floor is lowered, down to single elements."""
    key = lambda q: "text" if "text" in q else "ids"
    current = [q[key(q)] for q in requests]
    floor = [max(1, len(s) // 16) for s in current]
    done = [False] * len(current)
    for _ in range(60):  # rounds; each shrinks an input or lowers a floor, so this is ample
        candidates = []
        for i, s in enumerate(current):
            size = len(s) // 2
            while not done[i] and size >= floor[i]:
                candidates += [(i, s[:at] + s[at + size:]) for at in range(0, len(s), size)]
                size //= 2
        results = run_both(args, [{key(requests[i]): c} for i, c in candidates], "minimise") if candidates else []
        best = {}
        for (i, c), (a, b) in zip(candidates, results):
            if not same(a, b) and (i not in best or len(c) < len(best[i])): best[i] = c
        for i in range(len(current)):
            if i in best: current[i] = best[i]
            elif floor[i] == 1: done[i] = True
            else: floor[i] = max(1, floor[i] // 4)
        if all(done): break
    final = [{key(q): s} for q, s in zip(requests, current)]
    return list(zip(final, run_both(args, final, "minimise")))

def describe(request):
    if "ids" in request: return f"ids {request['ids']}"
    s = request["text"]
    points = " ".join(f"U+{ord(c):04X}" for c in s) if len(s) <= 24 else f"{len(s)} code points"
    return f"text {json.dumps(s)} ({points})"

# ---- Main -------------------------------------------------------------------------------

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("--stepmix", "--peer", "--tokenizer", "--work", "--json"): p.add_argument(name, required=True)
    p.add_argument("--strings", type=int, default=17000, help="strings per category (a few categories take a share)")
    p.add_argument("--seed", type=int, default=20240601)
    p.add_argument("--show", type=int, default=3, help="failing inputs minimised and printed per category")
    args = p.parse_args()
    if unicodedata.unidata_version != BASELINE_UNICODE:
        setup_error(f"this Python has Unicode {unicodedata.unidata_version} tables; the skew classes need "
                    f"{BASELINE_UNICODE} (run it with Debian 12's /usr/bin/python3)")
    os.makedirs(args.work, exist_ok=True)
    stamps = [("start", time.monotonic())]

    ucd = json.loads(subprocess.run(["node", args.peer, "unicode"], capture_output=True, text=True, check=True).stdout)
    skew = UnicodeSkew(ucd)
    print(f"Unicode {ucd['unicode']} (the reference's: Node {ucd['node']}, ICU {ucd['icu']}) vs "
          f"{unicodedata.unidata_version} (Python): {len(skew.code_points)} code points differ in "
          f"tokenizer-relevant properties", file=sys.stderr)
    tokenizer = json.load(open(os.path.join(args.tokenizer, "tokenizer.json")))
    requests, categories = [], []
    for name, (make, share) in generators(ucd, skew, tokenizer).items():
        rng = random.Random(f"{name}:{args.seed}")
        for _ in range(max(1, round(args.strings * share))):
            x = make(rng)
            requests.append({"text": x} if isinstance(x, str) else {"ids": x})
            categories.append(name)
    stamps.append(("generate", time.monotonic()))
    print(f"{len(requests)} requests: stepmix, then the reference", file=sys.stderr)
    results = run_both(args, requests, "inputs")
    stamps.append(("run", time.monotonic()))

    counts = {name: dict.fromkeys(("compared", "mismatched", "unicode_skew", "other"), 0)
              for name in dict.fromkeys(categories)}
    mismatched = []
    for q, name, (a, b) in zip(requests, categories, results):
        counts[name]["compared"] += 1
        if not same(a, b):
            counts[name]["mismatched"] += 1
            mismatched.append((q, name, a, b))
    # Decoding maps bytes to bytes and asks no Unicode property, so only encoding can be skew:
    # an encode mismatch that holds skew code points and agrees once they are removed. A
    # refusal on one side only is never skew (stepmix refuses no valid UTF-8 text).
    has_skew = lambda q, a, b: ("text" in q and "error" not in a and "error" not in b
                                and skew.within(q["text"]))
    rechecks = [{"text": skew.without(q["text"])} for q, _, a, b in mismatched if has_skew(q, a, b)]
    agree_without_skew = iter([same(a, b) for a, b in run_both(args, rechecks, "skew-recheck")] if rechecks else [])
    others = {}
    for q, name, a, b in mismatched:
        if has_skew(q, a, b):
            if next(agree_without_skew):
                counts[name]["unicode_skew"] += 1
                continue
            q = {"text": skew.without(q["text"])}  # fails without them too: shrink that form
        counts[name]["other"] += 1
        others.setdefault(name, []).append(q)
    stamps.append(("triage", time.monotonic()))

    shown = [(name, q) for name, qs in others.items() for q in qs[:args.show]]
    examples = {}
    for (name, q), (small, (a, b)) in zip(shown, minimise(args, [q for _, q in shown]) if shown else []):
        if small not in [e["minimal"] for e in examples.get(name, [])]:
            examples.setdefault(name, []).append({"input": q, "minimal": small, "stepmix": answer(a),
                                                  "reference": answer(b)})
    stamps.append(("minimise", time.monotonic()))

    total = check_report.count_table(counts, ("compared", "mismatched", "unicode_skew", "other"), 14)
    for name, items in examples.items():
        print(f"{name}: {counts[name]['other']} mismatches not explained by the Unicode versions; minimal inputs:")
        for e in items:
            print(f"  {describe(e['minimal'])}\n    stepmix   {json.dumps(e['stepmix'])}\n"
                  f"    reference {json.dumps(e['reference'])}")
    result = {"stepmix": check_report.stepmix_version(args.stepmix), "source_commit": check_report.source_commit(),
              "peer": check_report.npm_package(args.peer, "tokenizers"), "node": ucd["node"],
              "reference_unicode": ucd["unicode"],
              "icu": ucd["icu"], "baseline_unicode": unicodedata.unidata_version,
              "skew_code_points": len(skew.code_points), "seed": args.seed, "strings": args.strings,
              "categories": counts, "total": total, "other_examples": examples,
              "seconds": check_report.stage_seconds(stamps)}
    check_report.write_result(args.json, result)
    return 1 if total["other"] else 0

if __name__ == "__main__":
    check_report.run_main(main)
