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
#include "commands.hpp"
#include "stepmix/tools.hpp"

namespace stepmix::cli {

void add_prompt_command(CLI::App& app) {
  auto opt = std::make_shared<PromptOptions>();
  CLI::App* cmd = app.add_subcommand("prompt", "Build the Cosmos3 prompt texts and understanding ids (for checks)");
  cmd->add_option("-m,--model", opt->model, "Model folder (text_tokenizer/) or tokenizer folder")->required();
  CLI::Option* jsonl = cmd->add_option("--jsonl", opt->jsonl, "Requests, one JSON object per line ('-': standard input)");
  const std::vector<CLI::Option*> request = {
      cmd->add_option("-p,--prompt", opt->prompt, "Prompt text"),
      cmd->add_option("-n,--negative-prompt", opt->negative_prompt, "Negative prompt (default: empty)"),
      cmd->add_option("-H,--height", opt->height, "Height in pixels (default: 720 for videos, 1024 for images)"),
      cmd->add_option("-W,--width", opt->width, "Width in pixels (default: 1280 for videos, 1024 for images)"),
      cmd->add_option("--frames", opt->frames, "Number of frames (1 = image)")->default_val(189),
      cmd->add_option("--fps", opt->fps, "Frames per second of the duration sentence")->default_val(24.0),
      cmd->add_flag("--no-system-prompt", opt->no_system_prompt,
                    "No system message (default: model_index.json's "
                    "default_use_system_prompt, else on)"),
      cmd->add_flag("--system-prompt", opt->system_prompt,
                    "The system message even where model_index.json's default_use_system_prompt is false"),
      cmd->add_flag("--no-resolution-sentence", opt->no_resolution_sentence, "Leave out the resolution sentence"),
      cmd->add_flag("--no-duration-sentence", opt->no_duration_sentence, "Leave out the duration sentence")};
  for (CLI::Option* o : request) jsonl->excludes(o);
  cmd->get_option("--system-prompt")->excludes(cmd->get_option("--no-system-prompt"));
  cmd->callback([opt] { prompt(*opt, stdout); });
}

}  // namespace stepmix::cli
