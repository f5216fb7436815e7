// stepmix::tokenize (include/stepmix/tools.hpp): a tokenizer.json on its
// own, for checking it against reference implementations.
//   text   prints {"ids": [...]}
//   ids    prints {"text": ..., "text_skip_special_tokens": ...}
//          (with skip_special_tokens only {"text": ...}, skipped)
//   jsonl  one object per line with "text" (encode) or "ids" (decode), and
//          optionally "id" (echoed) and "category"/"note" (ignored); one
//          answer per line, in order, each with the line's "id". An id
//          outside the vocabulary answers {"id": ..., "error": "..."}; a
//          malformed line stops the command with an error naming it.
#include <charconv>
#include <optional>
#include <string>

#include "stepmix/tools.hpp"
#include "text/jsonl_input.hpp"
#include "text/prompt_model.hpp"
#include "text/tokenizer.hpp"
#include "text/unicode.hpp"

namespace stepmix {
namespace {

using ordered_json = nlohmann::ordered_json;

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

void answer_line(std::FILE* f, const text::Tokenizer& tok, const std::string& label, const nlohmann::json& line, bool skip_only) {
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
  text::print_json_line(f, out);
}

}  // namespace

void tokenize(const TokenizeOptions& opt, std::FILE* f) {
  const int modes = int(bool(opt.text)) + int(bool(opt.ids)) + int(bool(opt.jsonl));
  if (modes != 1) throw Error("tokenize", "give exactly one of --text, --ids and --jsonl");
  const text::Tokenizer tok = text::Tokenizer::from_file(text::locate_tokenizer(opt.tokenizer).tokenizer_json);
  if (opt.text) {
    text::require_utf8(*opt.text, "tokenize", "--text");
    text::print_json_line(f, ordered_json{{"ids", tok.encode(*opt.text)}});
  } else if (opt.ids) {
    text::print_json_line(f, decoded(tok, parse_ids(*opt.ids), opt.skip_special_tokens));
  } else {
    text::for_each_jsonl_object(*opt.jsonl, "tokenize", [&](const std::string& label, const nlohmann::json& line) {
      answer_line(f, tok, label, line, opt.skip_special_tokens);
    });
  }
  std::fflush(f);
}


}  // namespace stepmix
