// The reference side of bench/run-prompt-differential.sh: the chat template shipped
// with the tokenizer, executed by @huggingface/jinja 0.5.11 (the Jinja of
// Transformers.js), and the rendered text encoded by @huggingface/tokenizers 0.2.0.
// bench/prompt_differential.py writes the user texts (the metadata sentences are
// made there, in Python); this script does the rest of the prompt:
//   1. messages: [{system}] when the request has a system message, then {user};
//   2. render with add_generation_prompt true (the generation prompt is added and
//      nothing else is set, so no vision ids, tools or thinking switches);
//   3. encode with add_special_tokens false (the template already wrote the control
//      tokens as text and the tokenizer turns them into their ids);
//   4. append the id of tokenizer_config.json's eos_token, then the id of
//      <|vision_start|>, both looked up in tokenizer.json, never hard-coded;
//   5. more than 4096 ids on either side is a refusal: the texts, renderings and ids
//      are still written, with an "error".
//
// usage: node prompt_differential_peer.mjs TOKENIZER_DIR IN_JSONL > OUT_JSONL
//   in:  {"id", "system" (string or null), "positive_text", "negative_text"}
//        or {"id", "error"} (refused before tokenization: passed through)
//   out: {"id", "positive_text", "negative_text", "positive_rendered", "negative_rendered",
//         "positive_ids", "negative_ids", "positive_len", "negative_len"[, "error"]}
//        (the fields of `stepmix prompt --jsonl`), or {"id", "error"}
import { readFileSync, writeSync } from "node:fs";
import { Template } from "@huggingface/jinja";
import { Tokenizer } from "@huggingface/tokenizers";

const MAX_IDS = 4096;
const [dir, inPath] = process.argv.slice(2);
const tokenizerJson = JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8"));
const config = JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8"));
const tokenizer = new Tokenizer(tokenizerJson, config);
const template = new Template(readFileSync(`${dir}/chat_template.jinja`, "utf8"));

function idOf(token) {
  const content = typeof token === "string" ? token : token.content;  // eos_token may be an AddedToken object
  const added = tokenizerJson.added_tokens.find((t) => t.content === content);
  if (added) return added.id;
  if (content in tokenizerJson.model.vocab) return tokenizerJson.model.vocab[content];
  throw new Error(`no id for ${JSON.stringify(content)} in ${dir}/tokenizer.json`);
}
const eosId = idOf(config.eos_token), visionStartId = idOf("<|vision_start|>");

function prompt(system, user) {
  const messages = (system === null ? [] : [{ role: "system", content: system }]).concat([{ role: "user", content: user }]);
  const rendered = template.render({ messages, add_generation_prompt: true, bos_token: "", eos_token: config.eos_token });
  const ids = tokenizer.encode(rendered, { add_special_tokens: false }).ids.concat([eosId, visionStartId]);
  return [rendered, ids];
}

let buffer = [];
for (const line of readFileSync(inPath, "utf8").split("\n")) {
  if (!line.length) continue;
  const request = JSON.parse(line);
  let answer = request;
  if (!("error" in request)) {
    const [positiveRendered, positiveIds] = prompt(request.system, request.positive_text);
    const [negativeRendered, negativeIds] = prompt(request.system, request.negative_text);
    answer = { id: request.id, positive_text: request.positive_text, negative_text: request.negative_text,
               positive_rendered: positiveRendered, negative_rendered: negativeRendered,
               positive_ids: positiveIds, negative_ids: negativeIds,
               positive_len: positiveIds.length, negative_len: negativeIds.length };
    if (positiveIds.length > MAX_IDS || negativeIds.length > MAX_IDS)
      answer.error = `more than ${MAX_IDS} ids (positive ${positiveIds.length}, negative ${negativeIds.length})`;
  }
  buffer.push(JSON.stringify(answer));
  if (buffer.length >= 500) { writeSync(1, buffer.join("\n") + "\n"); buffer = []; }
}
if (buffer.length) writeSync(1, buffer.join("\n") + "\n");
