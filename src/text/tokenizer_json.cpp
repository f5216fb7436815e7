// Reading tokenizer.json into a TokenizerImpl: every field is either
// understood or refused by name (fail closed), since a setting stepmix
// ignored would silently change the ids.
#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "io/json_input.hpp"
#include "stepmix/error.hpp"
#include "text/byte_level.hpp"
#include "text/tokenizer_document.hpp"
#include "text/tokenizer_impl.hpp"

namespace stepmix::text {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& label, const std::string& what) { throw Error("tokenizer", label + ": " + what); }

bool is_token_id(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(kMaxTokenId);
  return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMaxTokenId;
}

std::string type_of(const json& n, const std::string& label, const std::string& field) {
  if (!n.is_object() || !n.contains("type") || !n["type"].is_string())
    fail(label, field + ": expected an object with a \"type\", got " + json_excerpt(n));
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
    fail(label, field + "." + key + ": expected " + (expected ? "true" : "false") + ", got " + json_excerpt(n[key]) + " (" +
                    why + ")");
}

bool optional_bool(const json& n, const char* key, bool fallback, const std::string& label, const std::string& field) {
  if (!n.contains(key)) return fallback;
  if (!n[key].is_boolean()) fail(label, field + "." + key + ": expected a boolean, got " + json_excerpt(n[key]));
  return n[key].get<bool>();
}

void require_null(const json& n, const char* key, const std::string& label, const std::string& field, const std::string& why) {
  if (n.contains(key) && !n[key].is_null())
    fail(label, (field.empty() ? "" : field + ".") + key + ": expected null, got " + json_excerpt(n[key]) + " (" + why + ")");
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
    fail(label, field + ".pattern: expected {\"Regex\": \"...\"} (String patterns are not supported), got " + json_excerpt(pattern));
  const std::string behavior = n.contains("behavior") && n["behavior"].is_string() ? n["behavior"].get<std::string>() : "";
  if (behavior != "Isolated")
    fail(label, field + ".behavior: expected \"Isolated\", got " + (n.contains("behavior") ? json_excerpt(n["behavior"]) : "nothing"));
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
  // The classes of the Rust regex crate, which `tokenizers` runs: \w is
  // Alphabetic, marks, decimal digits, connector punctuation and the joiners;
  // \s and char::is_whitespace are White_Space.
  static const std::string word = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}])";
  static const std::string not_word_or_space = R"([^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}\p{White_Space}])";
  if (type == "Whitespace")
    t.words = std::make_unique<Regex>(word + "+|" + not_word_or_space + "+", "tokenizer", "Whitespace words");
  else if (type == "WhitespaceSplit")
    t.words = std::make_unique<Regex>(R"([^\p{White_Space}]+)", "tokenizer", "WhitespaceSplit words");
  else
    fail(label, "pre_tokenizer.type: \"" + type + "\" is not supported (expected Whitespace or WhitespaceSplit)");
  only_keys(n, {"type"}, label, "pre_tokenizer");
}

// ---- models -----------------------------------------------------------------

void note_id(TokenizerImpl& t, int64_t id, const std::string& token) {
  t.id_to_token.emplace_back(id, token);
  t.vocab_size = std::max(t.vocab_size, id + 1);
}

// Sorts the vocabulary by id; two tokens on one id are an error.
void index_by_id(TokenizerImpl& t, const std::string& label) {
  std::sort(t.id_to_token.begin(), t.id_to_token.end());
  for (std::size_t i = 1; i < t.id_to_token.size(); ++i)
    if (t.id_to_token[i].first == t.id_to_token[i - 1].first)
      fail(label, "model.vocab." + t.id_to_token[i].second + ": id " + std::to_string(t.id_to_token[i].first) +
                      " is already \"" + t.id_to_token[i - 1].second + "\"");
}

// The captured vocabulary, checked: {token: id} with ids in range.
const TokenizerDocument::Vocab& checked_vocab(const TokenizerDocument& d, const std::string& label, const char* what) {
  if (!d.vocab.present || !d.vocab.is_object) fail(label, std::string("model.vocab: expected an object {") + what + ": id}");
  if (d.vocab.error) fail(label, *d.vocab.error);
  return d.vocab;
}

void read_word_level(const TokenizerDocument& d, const std::string& label, TokenizerImpl& t) {
  const json& model = d.doc["model"];
  only_keys(model, {"type", "vocab", "unk_token"}, label, "model");
  for (const auto& [word, id] : checked_vocab(d, label, "word").entries) {
    t.word_vocab[word] = id;
    note_id(t, id, word);
  }
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    if (!model["unk_token"].is_string()) fail(label, "model.unk_token: expected a string");
    const auto it = t.word_vocab.find(model["unk_token"].get<std::string>());
    if (it == t.word_vocab.end())
      fail(label, "model.unk_token: \"" + model["unk_token"].get<std::string>() + "\" is not in the vocab");
    t.unk_id = it->second;
  }
}

// token -> id over the captured entries without copying them: open
// addressing on (hash, entry index). Loading looks up three tokens per merge
// (450,000 for Qwen3), so this table is most of the load time that is not
// parsing. A token given twice keeps its last id.
class VocabIndex {
 public:
  explicit VocabIndex(const std::vector<std::pair<std::string, int64_t>>& entries) : entries_(entries) {
    std::size_t capacity = 16;
    while (capacity < 2 * entries.size()) capacity *= 2;
    slots_.assign(capacity, Slot{0, kEmpty});
    for (uint32_t i = 0; i < entries.size(); ++i) {
      const std::size_t h = std::hash<std::string_view>{}(entries[i].first);
      slots_[probe(entries[i].first, h)] = Slot{uint32_t(h), i};
    }
  }
  std::optional<int32_t> find(std::string_view token) const {
    const Slot& s = slots_[probe(token, std::hash<std::string_view>{}(token))];
    if (s.index == kEmpty) return std::nullopt;
    return static_cast<int32_t>(entries_[s.index].second);
  }

 private:
  static constexpr uint32_t kEmpty = ~uint32_t(0);
  struct Slot {
    uint32_t hash, index;
  };
  std::size_t probe(std::string_view token, std::size_t h) const {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = h & mask;
    while (slots_[i].index != kEmpty && (slots_[i].hash != uint32_t(h) || entries_[slots_[i].index].first != token))
      i = (i + 1) & mask;
    return i;
  }
  const std::vector<std::pair<std::string, int64_t>>& entries_;
  std::vector<Slot> slots_;
};

void read_bpe(const TokenizerDocument& d, const std::string& label, TokenizerImpl& t) {
  const json& model = d.doc["model"];
  only_keys(model, {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
                    "byte_fallback", "ignore_merges", "vocab", "merges"},
            label, "model");
  require_null(model, "dropout", label, "model", "BPE dropout is not implemented");
  require_null(model, "unk_token", label, "model", "a byte-level vocabulary covers every byte");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(affix) && !model[affix].is_null() && model[affix] != "")
      fail(label, std::string("model.") + affix + ": expected null or \"\", got " + json_excerpt(model[affix]) + " (not implemented)");
  optional_bool(model, "fuse_unk", false, label, "model");  // no effect without an unk token
  require_flag(model, "byte_fallback", false, label, "model", "byte fallback is not implemented");
  require_flag(model, "ignore_merges", false, label, "model", "ignore_merges is not implemented");

  const TokenizerDocument::Vocab& entries = checked_vocab(d, label, "token");
  const VocabIndex vocab(entries.entries);
  t.id_to_token.reserve(entries.entries.size());
  for (const auto& [token, id] : entries.entries) note_id(t, id, token);
  int32_t byte_ids[256];
  for (int b = 0; b < 256; ++b) {
    const auto id = vocab.find(byte_level_symbols()[b]);
    if (!id) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      fail(label, "model.vocab: no entry for byte " + std::string(hex) + " (\"" + byte_level_symbols()[b] +
                      "\"): a byte-level vocabulary needs all 256 bytes");
    }
    byte_ids[b] = *id;
  }

  if (!d.merges.present || !d.merges.is_array) fail(label, "model.merges: expected an array");
  if (d.merges.error) fail(label, *d.merges.error);
  const auto& merges = d.merges.pairs;
  MergeTable table;
  table.reserve(merges.size());
  auto id_of = [&](std::string_view token, std::size_t rank, const char* what) {
    const auto id = vocab.find(token);
    if (!id)
      fail(label, "model.merges[" + std::to_string(rank) + "]: " + what + " \"" + std::string(token) +
                      "\" is not in the vocabulary");
    return *id;
  };
  std::string joined;
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const int32_t a = id_of(left, rank, "left part"), b = id_of(right, rank, "right part");
    joined.assign(left).append(right);
    table.insert(a, b, MergeEntry{static_cast<uint32_t>(rank), id_of(joined, rank, "the merged token")});
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
      fail(label, field + ".id: expected an integer in [0, " + kMaxIdText + "], got " + (a.contains("id") ? json_excerpt(a["id"]) : "nothing"));
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
    const std::string* known = vocab_token(t, tok.id);
    if (!known)
      t.vocab_size = std::max(t.vocab_size, tok.id + 1);
    else if (*known != tok.content)
      fail(label, field + ".id: " + std::to_string(tok.id) + " is the vocabulary's \"" + *known + "\", not \"" +
                      tok.content + "\"");
    t.added_by_id[tok.id] = t.added.size();
    t.added.push_back(std::move(tok));
  }
}

}  // namespace

std::shared_ptr<const TokenizerImpl> load_tokenizer_json(std::string_view text, const std::string& label) {
  const TokenizerDocument document = parse_tokenizer_document(text, label);
  const json& doc = document.doc;
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
    read_word_level(document, label, *t);
  } else if (type == "BPE") {
    t->kind = ModelKind::bpe;
    read_bpe(document, label, *t);
  } else {
    fail(label, "model.type: \"" + type + "\" is not supported (stepmix reads WordLevel and byte-level BPE tokenizers)");
  }
  index_by_id(*t, label);
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
    if (t->lowercase) content = lowercase(content);
    t->normalized_added.add(a, std::move(content));
  }
  return t;
}

}  // namespace stepmix::text
