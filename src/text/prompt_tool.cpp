// stepmix::prompt (include/stepmix/tools.hpp): the Cosmos3 prompt builder on
// its own — augmented texts, rendered chat texts and the understanding ids a
// run would feed the transformer, for one request or a JSONL file of them.
// A request stepmix refuses (more than 4096 ids, a zero height, ...)
// answers {"id": ..., "error": "..."}; a malformed line stops with an error
// naming the line.
#include <optional>
#include <string>

#include "stepmix/tools.hpp"
#include "text/jsonl_input.hpp"
#include "text/prompt_model.hpp"
#include "text/unicode.hpp"

namespace stepmix {
namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json prompt_json(const text::Cosmos3Prompt& p) {
  return ordered_json{{"positive_text", p.positive_text},         {"negative_text", p.negative_text},
                      {"positive_rendered", p.positive_rendered}, {"negative_rendered", p.negative_rendered},
                      {"positive_ids", p.positive_ids},           {"negative_ids", p.negative_ids},
                      {"positive_len", p.positive_ids.size()},    {"negative_len", p.negative_ids.size()}};
}

}  // namespace

void prompt(const PromptOptions& opt, std::FILE* f) {
  const text::PromptModel model = text::PromptModel::open(opt.model);
  if (!opt.jsonl) {
    if (!opt.prompt) throw Error("prompt", "give --prompt (and request options) or --jsonl FILE");
    text::Cosmos3PromptRequest r;
    r.prompt = *opt.prompt;
    r.negative_prompt = opt.negative_prompt;
    r.height = opt.height;
    r.width = opt.width;
    r.num_frames = opt.frames;
    r.fps = opt.fps;
    if (opt.no_system_prompt) r.use_system_prompt = false;
    if (opt.system_prompt) r.use_system_prompt = true;
    r.resolution_sentence = !opt.no_resolution_sentence;
    r.duration_sentence = !opt.no_duration_sentence;
    text::require_utf8(r.prompt, "prompt", "--prompt");
    if (r.negative_prompt) text::require_utf8(*r.negative_prompt, "prompt", "--negative-prompt");
    text::print_json_line(f, prompt_json(model.build(r)));
  } else {
    text::for_each_jsonl_object(*opt.jsonl, "prompt", [&](const std::string& label, const nlohmann::json& line) {
      const text::Cosmos3PromptRequest r = text::cosmos3_request_from_json(line, label);
      ordered_json out;
      if (line.contains("id")) out["id"] = line["id"];
      try {
        const ordered_json answer = prompt_json(model.build(r));
        out.update(answer);
      } catch (const Error& e) {
        out["error"] = e.what();
      }
      text::print_json_line(f, out);
    });
  }
  std::fflush(f);
}


}  // namespace stepmix
