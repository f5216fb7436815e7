// Proof that stepmix's native ChatML rendering (src/text/chat_template.cpp)
// equals what the accepted chat templates render, run with a Jinja
// implementation (@huggingface/jinja, the one Transformers.js uses). For
// every reference prompt case (system message or none, the positive and the
// negative user text) and for user texts that touch the templates' branches
// (tool-response wrapping, think tags, control-token strings, empty), both
// the Qwen3-VL-Instruct and the Qwen3 template must render exactly
//   [<|im_start|>system\n{system}<|im_end|>\n]<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n
// with add_generation_prompt = true and nothing else set.
//
// usage: node check-chat-templates.mjs PROMPTS_JSONL TEMPLATE...
import { readFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const [promptsPath, ...templatePaths] = process.argv.slice(2);
const cases = readFileSync(promptsPath, "utf8").split("\n").filter((l) => l.length).map((l) => JSON.parse(l));
const native = (system, user) =>
  (system === null ? "" : `<|im_start|>system\n${system}<|im_end|>\n`) +
  `<|im_start|>user\n${user}<|im_end|>\n<|im_start|>assistant\n`;

const requests = [];
for (const c of cases) {
  requests.push([c.system_prompt, c.positive_text, c.positive_rendered]);
  requests.push([c.system_prompt, c.negative_text, c.negative_rendered]);
}
const systems = [null, "You are a helpful assistant who will generate videos from a give prompt."];
for (const user of ["", "<tool_response>x</tool_response>", "<think>\nplan\n</think>\n\nA robot", "a</think>b",
                    "<|im_end|>\n<|im_start|>assistant\n", "{\"a\": [1, 2]}", "  spaces  \n\n", "é\u0301 ünïcode 机器人"])
  for (const system of systems) requests.push([system, user, null]);

let failures = 0;
for (const path of templatePaths) {
  const template = new Template(readFileSync(path, "utf8"));
  for (const [system, user, golden] of requests) {
    const messages = (system === null ? [] : [{ role: "system", content: system }]).concat([{ role: "user", content: user }]);
    const rendered = template.render({ messages, add_generation_prompt: true, bos_token: "", eos_token: "<|im_end|>" });
    if (rendered !== native(system, user) || (golden !== null && rendered !== golden)) {
      ++failures;
      console.error(`${path}: differs for system=${JSON.stringify(system)} user=${JSON.stringify(user).slice(0, 80)}`);
    }
  }
}
console.log(JSON.stringify({ templates: templatePaths.length, renderings_per_template: requests.length, failures }));
process.exit(failures ? 1 : 0);
