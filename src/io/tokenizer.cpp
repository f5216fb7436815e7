#include "io/tokenizer.hpp"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "io/json_input.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& label, const std::string& what) { throw Error("tokenizer", label + ": " + what); }

// The end-of-text token of the understanding prefix, by the names tokenizers
// use for it (ChatML first, as Cosmos3's Qwen vocabulary has it).
constexpr const char* kEosNames[] = {"<|im_end|>", "<|endoftext|>", "</s>", "<eos>", "[EOS]"};
constexpr const char* kVisionStart = "<|vision_start|>";

// Token ids index an embedding table, so they are bounded well below the
// int64 range (vocab_size = max id + 1 must not overflow).
constexpr int64_t kMaxTokenId = (int64_t(1) << 31) - 1;
const std::string kMaxIdText = std::to_string(kMaxTokenId);

bool is_token_id(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(kMaxTokenId);
  return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMaxTokenId;
}

// \w as the Whitespace pre-tokenizer sees ASCII: letters, digits, underscore.
// Bytes >= 0x80 (UTF-8 sequences) count as word characters so that non-ASCII
// words stay whole.
bool is_word_byte(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }
bool is_space_byte(unsigned char c) { return std::isspace(c) != 0; }

void check_normalizer(const json& n, const std::string& label, bool& lowercase) {
  if (n.is_null()) return;
  if (!n.is_object() || !n.contains("type") || !n["type"].is_string())
    fail(label, "normalizer: expected null or an object with a \"type\"");
  const std::string type = n["type"];
  if (type == "Lowercase") {
    lowercase = true;
  } else if (type == "Sequence") {
    if (!n.contains("normalizers") || !n["normalizers"].is_array())
      fail(label, "normalizer.normalizers: expected an array");
    for (const json& inner : n["normalizers"]) check_normalizer(inner, label, lowercase);
  } else {
    fail(label, "normalizer.type: \"" + type + "\" is not supported (expected Lowercase or a Sequence of it)");
  }
}

}  // namespace

Tokenizer Tokenizer::from_file(const std::string& path) {
  return from_json_text(read_small_file(path, "tokenizer"), path);
}

Tokenizer Tokenizer::from_json_text(const std::string& text, const std::string& label) {
  // Nesting limit, then parse; a duplicate key (two ids for one word) is an
  // error, as is any syntax error.
  const json doc = parse_json_text(text, label, "tokenizer");
  if (!doc.is_object()) fail(label, "expected a JSON object");
  Tokenizer tok;
  tok.label_ = label;

  if (!doc.contains("model") || !doc["model"].is_object()) fail(label, "model: expected an object");
  const json& model = doc["model"];
  const std::string type = model.contains("type") && model["type"].is_string() ? model["type"].get<std::string>() : "";
  if (type != "WordLevel")
    fail(label, "model.type: \"" + type + "\" is not supported (stepmix reads WordLevel tokenizers; byte-level BPE is not "
                "implemented yet)");
  if (!model.contains("vocab") || !model["vocab"].is_object()) fail(label, "model.vocab: expected an object {word: id}");
  for (const auto& [word, id] : model["vocab"].items()) {
    if (!is_token_id(id)) fail(label, "model.vocab." + word + ": expected an integer id in [0, " + kMaxIdText + "]");
    tok.vocab_.emplace(word, id.get<int64_t>());
    tok.vocab_size_ = std::max(tok.vocab_size_, id.get<int64_t>() + 1);
  }
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    if (!model["unk_token"].is_string()) fail(label, "model.unk_token: expected a string");
    auto it = tok.vocab_.find(model["unk_token"].get<std::string>());
    if (it == tok.vocab_.end()) fail(label, "model.unk_token: \"" + model["unk_token"].get<std::string>() + "\" is not in the vocab");
    tok.unk_id_ = it->second;
  }

  if (doc.contains("added_tokens")) {
    if (!doc["added_tokens"].is_array()) fail(label, "added_tokens: expected an array");
    for (const json& a : doc["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !is_token_id(a["id"]) || !a.contains("content") ||
          !a["content"].is_string() || a["content"].get<std::string>().empty())
        fail(label, "added_tokens: each entry needs an integer \"id\" in [0, " + kMaxIdText +
                        "] and a non-empty \"content\"");
      tok.added_.emplace_back(a["content"].get<std::string>(), a["id"].get<int64_t>());
      tok.vocab_size_ = std::max(tok.vocab_size_, a["id"].get<int64_t>() + 1);
    }
    std::sort(tok.added_.begin(), tok.added_.end(),
              [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });
  }

  check_normalizer(doc.value("normalizer", json()), label, tok.lowercase_);
  const json pre = doc.value("pre_tokenizer", json());
  const std::string pre_type = pre.is_object() && pre.contains("type") && pre["type"].is_string() ? pre["type"].get<std::string>() : "";
  if (pre_type == "Whitespace")
    tok.split_punctuation_ = true;
  else if (pre_type == "WhitespaceSplit")
    tok.split_punctuation_ = false;
  else
    fail(label, "pre_tokenizer.type: \"" + pre_type + "\" is not supported (expected Whitespace or WhitespaceSplit)");
  // A post-processor would add tokens of its own; the decoder does not
  // affect encoding and is ignored.
  if (doc.contains("post_processor") && !doc["post_processor"].is_null())
    fail(label, "post_processor: expected null (stepmix appends the end and vision-start tokens itself)");

  for (const char* name : kEosNames)
    if (auto id = tok.token_id(name)) {
      tok.eos_id_ = *id;
      break;
    }
  if (tok.eos_id_ < 0) fail(label, "no end-of-text token (expected one of <|im_end|>, <|endoftext|>, </s>, <eos>, [EOS])");
  const auto vision = tok.token_id(kVisionStart);
  if (!vision) fail(label, std::string("no ") + kVisionStart + " token");
  tok.vision_start_id_ = *vision;
  return tok;
}

std::optional<int64_t> Tokenizer::token_id(const std::string& content) const {
  for (const auto& [text, id] : added_)
    if (text == content) return id;
  auto it = vocab_.find(content);
  if (it != vocab_.end()) return it->second;
  return std::nullopt;
}

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  auto emit_words = [&](std::string piece) {
    if (lowercase_)
      for (char& c : piece) c = char(std::tolower(static_cast<unsigned char>(c)));
    std::size_t i = 0;
    while (i < piece.size()) {
      const auto c = static_cast<unsigned char>(piece[i]);
      if (is_space_byte(c)) {
        ++i;
        continue;
      }
      std::size_t j = i;
      if (!split_punctuation_) {
        while (j < piece.size() && !is_space_byte(static_cast<unsigned char>(piece[j]))) ++j;
      } else {
        const bool word = is_word_byte(c);
        while (j < piece.size() && !is_space_byte(static_cast<unsigned char>(piece[j])) &&
               is_word_byte(static_cast<unsigned char>(piece[j])) == word)
          ++j;
      }
      const std::string w = piece.substr(i, j - i);
      auto it = vocab_.find(w);
      if (it != vocab_.end())
        ids.push_back(it->second);
      else if (unk_id_)
        ids.push_back(*unk_id_);
      else
        fail(label_, "word \"" + w + "\" is not in the vocabulary and the tokenizer has no unk_token");
      i = j;
    }
  };
  // Added tokens split the text first and are never normalised.
  std::size_t start = 0, pos = 0;
  while (pos < text.size()) {
    bool matched = false;
    for (const auto& [content, id] : added_) {
      if (text.compare(pos, content.size(), content) == 0) {
        emit_words(text.substr(start, pos - start));
        ids.push_back(id);
        pos += content.size();
        start = pos;
        matched = true;
        break;
      }
    }
    if (!matched) ++pos;
  }
  emit_words(text.substr(start));
  return ids;
}

std::vector<int64_t> Tokenizer::understanding_prefix(const std::string& text) const {
  std::vector<int64_t> ids = encode(text);
  ids.push_back(eos_id_);
  ids.push_back(vision_start_id_);
  return ids;
}

}  // namespace stepmix
