// `stepmix prompt --model DIR (request options | --jsonl FILE)`: the Cosmos3
// prompt builder on its own — augmented texts, rendered chat texts and the
// understanding ids a run would feed the transformer.
//
// Request options: --prompt (required), --negative-prompt, --height,
// --width, --frames (1 = image), --fps, --no-system-prompt,
// --no-resolution-sentence, --no-duration-sentence. With --jsonl every line
// carries the same request as JSON (text/cosmos3_prompt.hpp lists the
// fields); each answer echoes the line's "id". A request stepmix refuses
// (more than 4096 ids, a zero height, ...) answers {"id": ..., "error": "..."};
// a malformed line stops the command with an error naming the line.
#include <optional>
#include <string>

#include "stepmix/error.hpp"
#include "text/prompt_model.hpp"
#include "text/unicode.hpp"
#include "tools/commands.hpp"
#include "tools/jsonl_input.hpp"

namespace stepmix::cli {
namespace {

using ordered_json = nlohmann::ordered_json;

struct PromptOptions {
  std::string model;
  std::optional<std::string> prompt, negative_prompt, jsonl;
  std::optional<int64_t> height, width;
  int64_t frames = 189;
  double fps = 24.0;
  bool no_system_prompt = false, no_resolution_sentence = false, no_duration_sentence = false;
};

ordered_json prompt_json(const text::Cosmos3Prompt& p) {
  return ordered_json{{"positive_text", p.positive_text},         {"negative_text", p.negative_text},
                      {"positive_rendered", p.positive_rendered}, {"negative_rendered", p.negative_rendered},
                      {"positive_ids", p.positive_ids},           {"negative_ids", p.negative_ids},
                      {"positive_len", p.positive_ids.size()},    {"negative_len", p.negative_ids.size()}};
}

void run_prompt(const PromptOptions& opt) {
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
    r.resolution_sentence = !opt.no_resolution_sentence;
    r.duration_sentence = !opt.no_duration_sentence;
    text::require_utf8(r.prompt, "prompt", "--prompt");
    if (r.negative_prompt) text::require_utf8(*r.negative_prompt, "prompt", "--negative-prompt");
    print_json_line(prompt_json(model.build(r)));
  } else {
    for_each_jsonl_object(*opt.jsonl, "prompt", [&](const std::string& label, const nlohmann::json& line) {
      const text::Cosmos3PromptRequest r = text::cosmos3_request_from_json(line, label);
      ordered_json out;
      if (line.contains("id")) out["id"] = line["id"];
      try {
        const ordered_json answer = prompt_json(model.build(r));
        out.update(answer);
      } catch (const Error& e) {
        out["error"] = e.what();
      }
      print_json_line(out);
    });
  }
  std::fflush(stdout);
}

}  // namespace

void add_prompt_command(CLI::App& app) {
  auto opt = std::make_shared<PromptOptions>();
  CLI::App* cmd = app.add_subcommand("prompt", "Build the Cosmos3 prompt texts and understanding ids (for checks)");
  cmd->add_option("--model", opt->model, "Model folder (text_tokenizer/) or tokenizer folder")->required();
  CLI::Option* jsonl = cmd->add_option("--jsonl", opt->jsonl, "Requests, one JSON object per line ('-': standard input)");
  const std::vector<CLI::Option*> request = {
      cmd->add_option("--prompt", opt->prompt, "Prompt text"),
      cmd->add_option("--negative-prompt", opt->negative_prompt, "Negative prompt (default: empty)"),
      cmd->add_option("--height", opt->height, "Height in pixels (default: 720 for videos, 1024 for images)"),
      cmd->add_option("--width", opt->width, "Width in pixels (default: 1280 for videos, 1024 for images)"),
      cmd->add_option("--frames", opt->frames, "Number of frames (1 = image)")->default_val(189),
      cmd->add_option("--fps", opt->fps, "Frames per second of the duration sentence")->default_val(24.0),
      cmd->add_flag("--no-system-prompt", opt->no_system_prompt, "No system message (default: model_index.json's "
                                                                 "default_use_system_prompt, else on)"),
      cmd->add_flag("--no-resolution-sentence", opt->no_resolution_sentence, "Leave out the resolution sentence"),
      cmd->add_flag("--no-duration-sentence", opt->no_duration_sentence, "Leave out the duration sentence")};
  for (CLI::Option* o : request) jsonl->excludes(o);
  cmd->callback([opt] { run_prompt(*opt); });
}

}  // namespace stepmix::cli
