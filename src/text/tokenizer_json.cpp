// Reading tokenizer.json into a TokenizerImpl: every field is either
// understood or refused by name (fail closed), since a setting stepmix
// ignored would silently change the ids.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "io/json_input.hpp"
#include "stepmix/error.hpp"
#include "text/byte_level.hpp"
#include "text/tokenizer_impl.hpp"

namespace stepmix::text {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& label, const std::string& what) { throw Error("tokenizer", label + ": " + what); }

// Token ids index an embedding table, so they are bounded well below the
// int64 range (vocab_size = max id + 1 must not overflow).
constexpr int64_t kMaxTokenId = (int64_t(1) << 31) - 1;
const std::string kMaxIdText = std::to_string(kMaxTokenId);

bool is_token_id(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(kMaxTokenId);
  return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMaxTokenId;
}

// A short rendering of a value for messages.
std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string type_of(const json& n, const std::string& label, const std::string& field) {
  if (!n.is_object() || !n.contains("type") || !n["type"].is_string())
    fail(label, field + ": expected an object with a \"type\", got " + shown(n));
  return n["type"].get<std::string>();
}

void only_keys(const json& n, std::initializer_list<const char*> keys, const std::string& label, const std::string& field) {
  for (const auto& [key, value] : n.items()) {
    if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; })) {
      std::string known;
      for (const char* k : keys) known += std::string(known.empty() ? "" : ", ") + k;
      fail(label, (field.empty() ? "" : field + ".") + key + ": not supported (stepmix reads " + known + ")");
    }
  }
}

// An optional boolean setting that stepmix implements for one value only.
void require_flag(const json& n, const char* key, bool expected, const std::string& label, const std::string& field,
                  const std::string& why) {
  if (!n.contains(key) || (n[key].is_null() && !expected)) return;
  if (!n[key].is_boolean() || n[key].get<bool>() != expected)
    fail(label, field + "." + key + ": expected " + (expected ? "true" : "false") + ", got " + shown(n[key]) + " (" +
                    why + ")");
}

bool optional_bool(const json& n, const char* key, bool fallback, const std::string& label, const std::string& field) {
  if (!n.contains(key)) return fallback;
  if (!n[key].is_boolean()) fail(label, field + "." + key + ": expected a boolean, got " + shown(n[key]));
  return n[key].get<bool>();
}

void require_null(const json& n, const char* key, const std::string& label, const std::string& field, const std::string& why) {
  if (n.contains(key) && !n[key].is_null())
    fail(label, (field.empty() ? "" : field + ".") + key + ": expected null, got " + shown(n[key]) + " (" + why + ")");
}

// ---- normalizer -------------------------------------------------------------

void read_normalizer(const json& n, const std::string& label, const std::string& field, TokenizerImpl& t) {
  if (n.is_null()) return;
  const std::string type = type_of(n, label, field);
  const bool bpe = t.kind == ModelKind::bpe;
  if (type == "Sequence") {
    only_keys(n, {"type", "normalizers"}, label, field);
    if (!n.contains("normalizers") || !n["normalizers"].is_array()) fail(label, field + ".normalizers: expected an array");
    for (std::size_t i = 0; i < n["normalizers"].size(); ++i)
      read_normalizer(n["normalizers"][i], label, field + ".normalizers[" + std::to_string(i) + "]", t);
  } else if (bpe && type == "NFC") {
    only_keys(n, {"type"}, label, field);
    t.nfc = true;
  } else if (!bpe && type == "Lowercase") {
    only_keys(n, {"type"}, label, field);
    t.lowercase = true;
  } else {
    fail(label, field + ".type: \"" + type + "\" is not supported (expected " +
                    (bpe ? "NFC or a Sequence of it for a BPE model" : "Lowercase or a Sequence of it") + ")");
  }
}

// ---- pre-tokenizer ----------------------------------------------------------

void read_byte_level(const json& n, const std::string& label, const std::string& field) {
  only_keys(n, {"type", "add_prefix_space", "trim_offsets", "use_regex"}, label, field);
  require_flag(n, "add_prefix_space", false, label, field, "a prefix space is not implemented");
  require_flag(n, "use_regex", false, label, field, "the GPT-2 split inside ByteLevel is not implemented; use a Split");
  optional_bool(n, "trim_offsets", false, label, field);  // offsets only
}

void read_split(const json& n, const std::string& label, const std::string& field, TokenizerImpl& t) {
  only_keys(n, {"type", "pattern", "behavior", "invert"}, label, field);
  if (!n.contains("pattern") || !n["pattern"].is_object()) fail(label, field + ".pattern: expected {\"Regex\": \"...\"}");
  const json& pattern = n["pattern"];
  if (pattern.size() != 1 || !pattern.contains("Regex") || !pattern["Regex"].is_string())
    fail(label, field + ".pattern: expected {\"Regex\": \"...\"} (String patterns are not supported), got " + shown(pattern));
  const std::string behavior = n.contains("behavior") && n["behavior"].is_string() ? n["behavior"].get<std::string>() : "";
  if (behavior != "Isolated")
    fail(label, field + ".behavior: expected \"Isolated\", got " + (n.contains("behavior") ? shown(n["behavior"]) : "nothing"));
  require_flag(n, "invert", false, label, field, "inverted splits are not implemented");
  t.splits.push_back(std::make_unique<Regex>(pattern["Regex"].get<std::string>(), "tokenizer", label + ": " + field + ".pattern.Regex"));
}

void read_bpe_pre_tokenizer(const json& n, const std::string& label, TokenizerImpl& t) {
  const std::string field = "pre_tokenizer";
  const char* expected = "expected ByteLevel, or a Sequence of Split(Isolated) steps ending in ByteLevel";
  const std::string type = type_of(n, label, field);
  if (type == "ByteLevel") {
    read_byte_level(n, label, field);
    return;
  }
  if (type != "Sequence") fail(label, field + ".type: \"" + type + "\" is not supported (" + expected + ")");
  only_keys(n, {"type", "pretokenizers"}, label, field);
  if (!n.contains("pretokenizers") || !n["pretokenizers"].is_array() || n["pretokenizers"].empty())
    fail(label, field + ".pretokenizers: expected a non-empty array");
  const json& steps = n["pretokenizers"];
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string f = field + ".pretokenizers[" + std::to_string(i) + "]";
    const std::string step = type_of(steps[i], label, f);
    const bool last = i + 1 == steps.size();
    if (step == "Split" && !last)
      read_split(steps[i], label, f, t);
    else if (step == "ByteLevel" && last)
      read_byte_level(steps[i], label, f);
    else
      fail(label, f + ".type: \"" + step + "\" is not supported here (" + expected + ")");
  }
}

void read_word_level_pre_tokenizer(const json& n, const std::string& label, TokenizerImpl& t) {
  const std::string type = n.is_object() && n.contains("type") && n["type"].is_string() ? n["type"].get<std::string>() : "";
  if (type == "Whitespace")
    t.split_punctuation = true;
  else if (type == "WhitespaceSplit")
    t.split_punctuation = false;
  else
    fail(label, "pre_tokenizer.type: \"" + type + "\" is not supported (expected Whitespace or WhitespaceSplit)");
  only_keys(n, {"type"}, label, "pre_tokenizer");
}

// ---- models -----------------------------------------------------------------

void note_id(TokenizerImpl& t, int64_t id, const std::string& token, const std::string& label, const std::string& field) {
  const auto [it, inserted] = t.id_to_token.emplace(id, token);
  if (!inserted) fail(label, field + ": id " + std::to_string(id) + " is already \"" + it->second + "\"");
  t.vocab_size = std::max(t.vocab_size, id + 1);
}

void read_word_level(const json& model, const std::string& label, TokenizerImpl& t) {
  only_keys(model, {"type", "vocab", "unk_token"}, label, "model");
  if (!model.contains("vocab") || !model["vocab"].is_object()) fail(label, "model.vocab: expected an object {word: id}");
  for (const auto& [word, id] : model["vocab"].items()) {
    if (!is_token_id(id)) fail(label, "model.vocab." + word + ": expected an integer id in [0, " + kMaxIdText + "]");
    t.word_vocab.emplace(word, id.get<int64_t>());
    note_id(t, id.get<int64_t>(), word, label, "model.vocab." + word);
  }
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    if (!model["unk_token"].is_string()) fail(label, "model.unk_token: expected a string");
    const auto it = t.word_vocab.find(model["unk_token"].get<std::string>());
    if (it == t.word_vocab.end())
      fail(label, "model.unk_token: \"" + model["unk_token"].get<std::string>() + "\" is not in the vocab");
    t.unk_id = it->second;
  }
}

// A merge as its two parts: "a b" or ["a", "b"].
std::pair<std::string, std::string> merge_parts(const json& m, const std::string& label, const std::string& field) {
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) return {m[0].get<std::string>(), m[1].get<std::string>()};
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const std::size_t space = s.find(' ');
    if (space != std::string::npos && space > 0 && space + 1 < s.size() && s.find(' ', space + 1) == std::string::npos)
      return {s.substr(0, space), s.substr(space + 1)};
  }
  fail(label, field + ": expected \"a b\" or [\"a\", \"b\"], got " + shown(m));
}

void read_bpe(const json& model, const std::string& label, TokenizerImpl& t) {
  only_keys(model, {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
                    "byte_fallback", "ignore_merges", "vocab", "merges"},
            label, "model");
  require_null(model, "dropout", label, "model", "BPE dropout is not implemented");
  require_null(model, "unk_token", label, "model", "a byte-level vocabulary covers every byte");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(affix) && !model[affix].is_null() && model[affix] != "")
      fail(label, std::string("model.") + affix + ": expected null or \"\", got " + shown(model[affix]) + " (not implemented)");
  optional_bool(model, "fuse_unk", false, label, "model");  // no effect without an unk token
  require_flag(model, "byte_fallback", false, label, "model", "byte fallback is not implemented");
  require_flag(model, "ignore_merges", false, label, "model", "ignore_merges is not implemented");

  if (!model.contains("vocab") || !model["vocab"].is_object()) fail(label, "model.vocab: expected an object {token: id}");
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(model["vocab"].size());
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!is_token_id(id)) fail(label, "model.vocab." + token + ": expected an integer id in [0, " + kMaxIdText + "]");
    vocab.emplace(token, static_cast<int32_t>(id.get<int64_t>()));
    note_id(t, id.get<int64_t>(), token, label, "model.vocab." + token);
  }
  int32_t byte_ids[256];
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab.find(byte_level_symbols()[b]);
    if (it == vocab.end()) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      fail(label, "model.vocab: no entry for byte " + std::string(hex) + " (\"" + byte_level_symbols()[b] +
                      "\"): a byte-level vocabulary needs all 256 bytes");
    }
    byte_ids[b] = it->second;
  }

  if (!model.contains("merges") || !model["merges"].is_array()) fail(label, "model.merges: expected an array");
  const json& merges = model["merges"];
  MergeTable table;
  table.reserve(merges.size());
  auto id_of = [&](const std::string& token, const std::string& field, const char* what) {
    const auto it = vocab.find(token);
    if (it == vocab.end()) fail(label, field + ": " + what + " \"" + token + "\" is not in the vocabulary");
    return it->second;
  };
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string field = "model.merges[" + std::to_string(rank) + "]";
    const auto [left, right] = merge_parts(merges[rank], label, field);
    const int32_t a = id_of(left, field, "left part"), b = id_of(right, field, "right part");
    const int32_t merged = id_of(left + right, field, "the merged token");
    table.insert(a, b, MergeEntry{static_cast<uint32_t>(rank), merged});
  }
  t.bpe = std::make_unique<BpeModel>(std::move(table), byte_ids);
}

// ---- added tokens -----------------------------------------------------------

void read_added_tokens(const json& doc, const std::string& label, TokenizerImpl& t) {
  if (!doc.contains("added_tokens") || doc["added_tokens"].is_null()) return;
  if (!doc["added_tokens"].is_array()) fail(label, "added_tokens: expected an array");
  const json& list = doc["added_tokens"];
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& a = list[i];
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    if (!a.is_object()) fail(label, field + ": expected an object");
    only_keys(a, {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"}, label, field);
    if (!a.contains("id") || !is_token_id(a["id"]))
      fail(label, field + ".id: expected an integer in [0, " + kMaxIdText + "], got " + (a.contains("id") ? shown(a["id"]) : "nothing"));
    if (!a.contains("content") || !a["content"].is_string() || a["content"].get<std::string>().empty())
      fail(label, field + ".content: expected a non-empty string");
    AddedToken tok;
    tok.id = a["id"].get<int64_t>();
    tok.content = a["content"].get<std::string>();
    // Hugging Face's defaults for flags a file leaves out.
    tok.special = optional_bool(a, "special", false, label, field);
    tok.single_word = optional_bool(a, "single_word", false, label, field);
    tok.lstrip = optional_bool(a, "lstrip", false, label, field);
    tok.rstrip = optional_bool(a, "rstrip", false, label, field);
    tok.normalized = optional_bool(a, "normalized", !tok.special, label, field);
    for (const AddedToken& other : t.added)
      if (other.content == tok.content) fail(label, field + ".content: \"" + tok.content + "\" is added twice");
    const auto known = t.id_to_token.find(tok.id);
    if (known == t.id_to_token.end())
      t.vocab_size = std::max(t.vocab_size, tok.id + 1);
    else if (known->second != tok.content)
      fail(label, field + ".id: " + std::to_string(tok.id) + " is the vocabulary's \"" + known->second + "\", not \"" +
                      tok.content + "\"");
    t.added_by_id[tok.id] = t.added.size();
    t.added.push_back(std::move(tok));
  }
}

}  // namespace

std::shared_ptr<const TokenizerImpl> load_tokenizer_json(std::string_view text, const std::string& label) {
  const json doc = parse_json_text(text, label, "tokenizer");
  if (!doc.is_object()) fail(label, "expected a JSON object");
  only_keys(doc, {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "post_processor",
                  "decoder", "model"},
            label, "");
  require_null(doc, "truncation", label, "", "stepmix never truncates a prompt");
  require_null(doc, "padding", label, "", "stepmix never pads a prompt");

  auto t = std::make_shared<TokenizerImpl>();
  t->label = label;
  if (!doc.contains("model") || !doc["model"].is_object()) fail(label, "model: expected an object");
  const json& model = doc["model"];
  const std::string type = model.contains("type") && model["type"].is_string() ? model["type"].get<std::string>() : "";
  if (type == "WordLevel") {
    t->kind = ModelKind::word_level;
    read_word_level(model, label, *t);
  } else if (type == "BPE") {
    t->kind = ModelKind::bpe;
    read_bpe(model, label, *t);
  } else {
    fail(label, "model.type: \"" + type + "\" is not supported (stepmix reads WordLevel and byte-level BPE tokenizers)");
  }
  read_added_tokens(doc, label, *t);

  read_normalizer(doc.value("normalizer", json()), label, "normalizer", *t);
  const json pre = doc.value("pre_tokenizer", json());
  const json post = doc.value("post_processor", json());
  const json decoder = doc.value("decoder", json());
  if (t->kind == ModelKind::word_level) {
    read_word_level_pre_tokenizer(pre, label, *t);
    // A post-processor would add tokens of its own.
    if (!post.is_null()) fail(label, "post_processor: expected null (stepmix appends the end and vision-start tokens itself)");
    if (!decoder.is_null()) fail(label, "decoder: expected null for a WordLevel model (tokens are joined with spaces)");
  } else {
    read_bpe_pre_tokenizer(pre, label, *t);
    // ByteLevel as a post-processor only moves offsets; it adds no token.
    if (!post.is_null()) {
      if (type_of(post, label, "post_processor") != "ByteLevel")
        fail(label, "post_processor.type: \"" + post["type"].get<std::string>() +
                        "\" is not supported (expected null or ByteLevel: stepmix appends control tokens itself)");
      read_byte_level(post, label, "post_processor");
    }
    if (type_of(decoder, label, "decoder") != "ByteLevel")
      fail(label, "decoder.type: \"" + decoder["type"].get<std::string>() + "\" is not supported (expected ByteLevel)");
    only_keys(decoder, {"type", "add_prefix_space", "trim_offsets", "use_regex"}, label, "decoder");
  }

  // Normalized added tokens are matched in normalised text, so their
  // contents are normalised the same way.
  for (const AddedToken& a : t->added) {
    if (!a.normalized) {
      t->raw_added.add(a, a.content);
      continue;
    }
    std::string content = t->nfc ? nfc(a.content) : a.content;
    if (t->lowercase)
      for (char& c : content) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    t->normalized_added.add(a, std::move(content));
  }
  return t;
}

}  // namespace stepmix::text
