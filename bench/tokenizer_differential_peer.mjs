// The reference side of bench/run-tokenizer-differential.sh: @huggingface/tokenizers
// 0.2.0 (the tokenizer Transformers.js runs) on Node, plus the Unicode tables of
// that Node (its ICU), which the differential needs to generate inputs and to tell
// Unicode-version skew from real mismatches.
//
// usage: node tokenizer_differential_peer.mjs unicode
//          prints one JSON object: the versions of Node, Unicode and ICU; per
//          General_Category the code point ranges; White_Space; the code points whose
//          NFD or NFC is not themselves (with that NFD/NFC); the canonical combining
//          classes as ordered groups (see below).
//        node tokenizer_differential_peer.mjs run TOKENIZER_DIR IN_JSONL OUT_JSONL
//          each {"id", "text"} -> {"id", "ids"} (encode, add_special_tokens false);
//          each {"id", "ids"}  -> {"id", "text", "text_skip_special_tokens"} (decode);
//          a throw -> {"id", "error"}: the lines of `stepmix tokenize --jsonl`.
import { closeSync, openSync, readFileSync, writeSync } from "node:fs";

const [mode, ...args] = process.argv.slice(2);

function unicodeTables() {
  const categories = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
                      "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"];
  const tests = categories.map((c) => [c, new RegExp(`^\\p{gc=${c}}$`, "u")]);
  const whiteSpace = /^\p{White_Space}$/u;
  const ranges = Object.fromEntries(categories.map((c) => [c, []]));
  const white = [], nfd = {}, nfc = {}, nonStarters = [];
  let previous = null, start = 0;
  for (let cp = 0; cp <= 0x110000; ++cp) {
    let category = null;
    if (cp < 0x110000) {
      const s = String.fromCodePoint(cp);
      category = tests.find(([, re]) => re.test(s))[0];
      if (whiteSpace.test(s)) white.push(cp);
      if (category !== "Cs") {
        const d = s.normalize("NFD"), c = s.normalize("NFC");
        if (d !== s) nfd[cp] = d;
        if (c !== s) nfc[cp] = c;
        // JavaScript does not expose Canonical_Combining_Class; canonical reordering
        // does: a non-starter X swaps with U+0345 (ccc 240, the largest) placed before
        // it unless ccc(X) is 240, and with U+0334 (ccc 1, the smallest) placed after
        // it unless ccc(X) is 1. A code point that decomposes is not asked: only its
        // decomposition takes part in normalization, and that is compared as nfd.
        if (d === s && (("\u0345" + s).normalize("NFD") !== "\u0345" + s ||
                        (s + "\u0334").normalize("NFD") !== s + "\u0334")) nonStarters.push(s);
      }
    }
    if (category !== previous) {
      if (previous !== null) ranges[previous].push([start, cp - 1]);
      previous = category;
      start = cp;
    }
  }
  // Order the non-starters by ccc: NFD puts the one of lower class first when two
  // differ and keeps equal ones in place. The caller gives each group its value from
  // the members its own Unicode version knows (ccc values never change, by policy).
  const order = (a, b) => ((a + b).normalize("NFD") === b + a ? 1 : (b + a).normalize("NFD") === a + b ? -1 : 0);
  nonStarters.sort(order);
  const cccGroups = [];
  for (const s of nonStarters) {
    const last = cccGroups[cccGroups.length - 1];
    if (last && order(last[0], s) === 0) last.push(s); else cccGroups.push([s]);
  }
  return {
    node: process.version, unicode: process.versions.unicode, icu: process.versions.icu, ranges, white, nfd, nfc,
    ccc_groups: cccGroups.map((g) => g.map((s) => s.codePointAt(0))),
  };
}

async function run(dir, inPath, outPath) {
  const { Tokenizer } = await import("@huggingface/tokenizers");
  const tok = new Tokenizer(JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8")),
                            JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8")));
  const out = openSync(outPath, "w");
  for (const line of readFileSync(inPath, "utf8").split("\n")) {
    if (!line.length) continue;
    const request = JSON.parse(line);
    let answer;
    try {
      answer = request.text !== undefined
        ? { id: request.id, ids: tok.encode(request.text, { add_special_tokens: false }).ids }
        : { id: request.id, text: tok.decode(request.ids, { skip_special_tokens: false }),
            text_skip_special_tokens: tok.decode(request.ids, { skip_special_tokens: true }) };
    } catch (e) {
      answer = { id: request.id, error: String(e) };
    }
    writeSync(out, JSON.stringify(answer) + "\n");
  }
  closeSync(out);
}

if (mode === "unicode") console.log(JSON.stringify(unicodeTables()));
else if (mode === "run" && args.length === 3) await run(...args);
else {
  console.error("usage: tokenizer_differential_peer.mjs unicode | run TOKENIZER_DIR IN_JSONL OUT_JSONL");
  process.exit(2);
}
