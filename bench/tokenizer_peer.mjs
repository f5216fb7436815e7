// The JavaScript reference for bench/run-tokenizer.sh: @huggingface/tokenizers
// (the tokenizer Transformers.js runs), measured exactly like
// bench/tokenizer_bench.cpp on the same files, on Node's one JavaScript thread.
//
// usage: node tokenizer_peer.mjs TOKENIZER_DIR TEXT_JSONL CAPTION_TXT [ROUNDS]
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { Tokenizer } from "@huggingface/tokenizers";

const [dir, textPath, captionPath, roundsArg] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 3);
const chunks = readFileSync(textPath, "utf8").split("\n").filter((l) => l.length).map((l) => JSON.parse(l).text);
const bytes = chunks.reduce((n, c) => n + Buffer.byteLength(c, "utf8"), 0);
const caption = readFileSync(captionPath, "utf8");
const json = () => JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8"));
const config = JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8"));

let t = performance.now();
const tok = new Tokenizer(json(), config);
const loadS = (performance.now() - t) / 1e3;

t = performance.now();
const captionIds = tok.encode(caption).ids.length;
const captionFirstMs = performance.now() - t;
const captionTimes = [];
for (let i = 0; i < 200; ++i) {
  const s = performance.now();
  tok.encode(caption);
  captionTimes.push(performance.now() - s);
}
captionTimes.sort((a, b) => a - b);

const fresh = new Tokenizer(json(), config);
const roundS = [], roundCpuS = [];
let checksum = 0, ids = 0;
for (let r = 0; r < rounds; ++r) {
  let h = 0, n = 0;
  const cpu = process.cpuUsage();
  const s = performance.now();
  for (const c of chunks) {
    const v = fresh.encode(c).ids;
    for (const id of v) h = (h * 31 + id) % 2147483647;
    n += v.length;
  }
  roundS.push((performance.now() - s) / 1e3);
  const used = process.cpuUsage(cpu);
  roundCpuS.push((used.user + used.system) / 1e6);
  checksum = h;
  ids = n;
}
const best = Math.min(...roundS), bestCpu = Math.min(...roundCpuS);
console.log(JSON.stringify({
  impl: "@huggingface/tokenizers", bytes, chunks: chunks.length, ids, checksum, load_s: loadS, round_s: roundS,
  mb_per_s_first_round: bytes / roundS[0] / 1e6, mb_per_s: bytes / best / 1e6, round_cpu_s: roundCpuS,
  mb_per_cpu_s: bytes / bestCpu / 1e6, caption_bytes: Buffer.byteLength(caption),
  caption_ids: captionIds, caption_first_ms: captionFirstMs, caption_median_ms: captionTimes[captionTimes.length >> 1],
}));
