// Text prompt -> token ids for the understanding prefix.
//
// Reads a Hugging Face `tokenizers` JSON (text_tokenizer/tokenizer.json).
// Supported today: the WordLevel model with a Whitespace or WhitespaceSplit
// pre-tokenizer and an optional Lowercase normalizer (what stepmix's embedded
// model uses). Anything else — the byte-level BPE of the real Qwen tokenizer
// included — is refused with an error naming the field, never approximated.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace stepmix {

class Tokenizer {
 public:
  // Throws stepmix::Error("[tokenizer] <path>: <field>: ...").
  static Tokenizer from_file(const std::string& path);
  static Tokenizer from_json_text(const std::string& text, const std::string& label);

  // Ids of `text`: added (special) tokens are matched verbatim first, the
  // rest is normalised, pre-tokenised and looked up (unknown words map to the
  // unk token; without one they are an error).
  std::vector<int64_t> encode(const std::string& text) const;

  // Id of a token by its exact content (vocabulary or added tokens).
  std::optional<int64_t> token_id(const std::string& content) const;
  int64_t vocab_size() const { return vocab_size_; }

  // The understanding prefix the pipeline feeds: encode(text), then the end
  // token, then <|vision_start|> (cosmos3-pipeline.md §4).
  std::vector<int64_t> understanding_prefix(const std::string& text) const;
  int64_t eos_id() const { return eos_id_; }
  int64_t vision_start_id() const { return vision_start_id_; }

 private:
  std::string label_;
  std::map<std::string, int64_t> vocab_;
  std::vector<std::pair<std::string, int64_t>> added_;  // longest content first
  std::optional<int64_t> unk_id_;
  bool lowercase_ = false;
  bool split_punctuation_ = true;  // Whitespace (\w+|[^\w\s]+) vs WhitespaceSplit
  int64_t vocab_size_ = 0;
  int64_t eos_id_ = -1;
  int64_t vision_start_id_ = -1;
};

}  // namespace stepmix
