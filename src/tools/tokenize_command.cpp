// `stepmix tokenize --tokenizer DIR (--text TEXT | --ids 1,2,3 | --jsonl FILE)
// [--skip-special-tokens]`: the tokenizer on its own, for checking it against
// reference implementations.
//
//   --text   prints {"ids": [...]}
//   --ids    prints {"text": ..., "text_skip_special_tokens": ...}
//            (with --skip-special-tokens only {"text": ...}, skipped)
//   --jsonl  one object per line with "text" (encode) or "ids" (decode), and
//            optionally "id" (echoed) and "category"/"note" (ignored); one
//            answer per line, in order, each with the line's "id". An id
//            outside the vocabulary answers {"id": ..., "error": "..."};
//            a malformed line stops the command with an error naming it.
#include "commands.hpp"
#include "stepmix/tools.hpp"

namespace stepmix::cli {

void add_tokenize_command(CLI::App& app) {
  auto opt = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Encode text or decode ids with a tokenizer.json (for checks)");
  cmd->add_option("--tokenizer", opt->tokenizer, "Tokenizer folder, model folder or tokenizer.json")->required();
  cmd->add_option("--text", opt->text, "Text to encode");
  cmd->add_option("--ids", opt->ids, "Ids to decode: 1,2,3");
  cmd->add_option("--jsonl", opt->jsonl, "Requests, one JSON object per line ('-': standard input)");
  cmd->add_flag("--skip-special-tokens", opt->skip_special_tokens,
                "Decode without the special tokens (prints only \"text\")");
  cmd->callback([opt] { tokenize(*opt, stdout); });
}

}  // namespace stepmix::cli
