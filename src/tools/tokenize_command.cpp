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
#include <charconv>
#include <optional>
#include <string>

#include "stepmix/error.hpp"
#include "text/prompt_model.hpp"
#include "text/tokenizer.hpp"
#include "text/unicode.hpp"
#include "tools/commands.hpp"
#include "tools/jsonl_input.hpp"

namespace stepmix::cli {
namespace {

using ordered_json = nlohmann::ordered_json;

struct TokenizeOptions {
  std::string tokenizer;
  std::optional<std::string> text, ids, jsonl;
  bool skip_special_tokens = false;
};

std::vector<int64_t> parse_ids(const std::string& list) {
  std::vector<int64_t> ids;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    int64_t v = 0;
    const char* b = list.data() + start;
    const char* e = list.data() + comma;
    const auto [end, ec] = std::from_chars(b, e, v);
    if (b == e || ec != std::errc() || end != e)
      throw Error("tokenize", "--ids: expected comma-separated integers, got '" + list + "'");
    ids.push_back(v);
    start = comma + 1;
  }
  return ids;
}

ordered_json decoded(const text::Tokenizer& tok, const std::vector<int64_t>& ids, bool skip_only) {
  ordered_json out;
  if (skip_only) {
    out["text"] = tok.decode(ids, true);
  } else {
    out["text"] = tok.decode(ids, false);
    out["text_skip_special_tokens"] = tok.decode(ids, true);
  }
  return out;
}

void answer_line(const text::Tokenizer& tok, const std::string& label, const nlohmann::json& line, bool skip_only) {
  for (const auto& [key, value] : line.items())
    if (key != "id" && key != "text" && key != "ids" && key != "category" && key != "note")
      throw Error("tokenize", label + ": unknown field \"" + key + "\" (expected id, text or ids, category, note)");
  const bool encode = line.contains("text"), decode = line.contains("ids");
  if (encode == decode) throw Error("tokenize", label + ": expected either \"text\" (encode) or \"ids\" (decode)");
  std::vector<int64_t> ids;
  if (encode && !line["text"].is_string()) throw Error("tokenize", label + ": text: expected a string");
  if (decode) {
    if (!line["ids"].is_array()) throw Error("tokenize", label + ": ids: expected an array of integers");
    for (const auto& v : line["ids"]) {
      if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
        throw Error("tokenize", label + ": ids: expected an array of integers, got " + v.dump());
      ids.push_back(v.get<int64_t>());
    }
  }
  ordered_json out;
  if (line.contains("id")) out["id"] = line["id"];
  try {
    if (encode) {
      out["ids"] = tok.encode(line["text"].get<std::string>());
    } else {
      const ordered_json answer = decoded(tok, ids, skip_only);
      out.update(answer);
    }
  } catch (const Error& e) {
    out.erase("ids");
    out["error"] = e.what();
  }
  print_json_line(out);
}

void run_tokenize(const TokenizeOptions& opt) {
  const int modes = int(bool(opt.text)) + int(bool(opt.ids)) + int(bool(opt.jsonl));
  if (modes != 1) throw Error("tokenize", "give exactly one of --text, --ids and --jsonl");
  const text::Tokenizer tok = text::Tokenizer::from_file(text::locate_tokenizer(opt.tokenizer).tokenizer_json);
  if (opt.text) {
    text::require_utf8(*opt.text, "tokenize", "--text");
    print_json_line(ordered_json{{"ids", tok.encode(*opt.text)}});
  } else if (opt.ids) {
    print_json_line(decoded(tok, parse_ids(*opt.ids), opt.skip_special_tokens));
  } else {
    for_each_jsonl_object(*opt.jsonl, "tokenize", [&](const std::string& label, const nlohmann::json& line) {
      answer_line(tok, label, line, opt.skip_special_tokens);
    });
  }
  std::fflush(stdout);
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto opt = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Encode text or decode ids with a tokenizer.json (for checks)");
  cmd->add_option("--tokenizer", opt->tokenizer, "Tokenizer folder, model folder or tokenizer.json")->required();
  cmd->add_option("--text", opt->text, "Text to encode");
  cmd->add_option("--ids", opt->ids, "Ids to decode: 1,2,3");
  cmd->add_option("--jsonl", opt->jsonl, "Requests, one JSON object per line ('-': standard input)");
  cmd->add_flag("--skip-special-tokens", opt->skip_special_tokens,
                "Decode without the special tokens (prints only \"text\")");
  cmd->callback([opt] { run_tokenize(*opt); });
}

}  // namespace stepmix::cli
