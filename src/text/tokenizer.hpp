// Text -> token ids and back, from a Hugging Face `tokenizers` JSON
// (tokenizer.json). Two families are read, each exactly as that library runs
// it; anything else in the file is refused with an error naming the field,
// never approximated (docs/text.md lists what is read and what is refused):
//
//   WordLevel (stepmix's embedded model): Lowercase normaliser,
//     Whitespace or WhitespaceSplit pre-tokenizer (Unicode classes, as the
//     Rust library has them), unk token.
//   BPE, byte-level (Qwen3 / Cosmos3's text_tokenizer/): NFC normaliser,
//     Sequence[Split(regex, Isolated)..., ByteLevel(add_prefix_space=false,
//     use_regex=false)] pre-tokenizer, merges by rank in either serialised
//     form ("a b" strings or [a, b] pairs), ByteLevel decoder.
//
// Both: added tokens matched in the raw text before normalisation (or in the
// normalised text for `normalized` ones), leftmost-longest, honouring
// special / lstrip / rstrip / single_word. Encoding adds nothing (no BOS or
// EOS); the prompt builder (text/prompt_model.hpp) appends the control ids.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace stepmix::text {

enum class ModelKind { word_level, bpe };

struct TokenizerImpl;

class Tokenizer {
 public:
  // Throws stepmix::Error("[tokenizer] <path>: <field>: ...").
  static Tokenizer from_file(const std::string& path);
  static Tokenizer from_json_text(std::string_view text, const std::string& label);

  // Ids of `text`, which must be well-formed UTF-8 (else an error giving the
  // byte offset). Safe to call from several threads at once.
  // With `unknown_words`, a WordLevel model appends every word it mapped to
  // its unk token (a byte-level BPE covers every byte: none).
  std::vector<int64_t> encode(std::string_view text, std::vector<std::string>* unknown_words = nullptr) const;
  // The `count` vocabulary words closest to `word` (edit distance; WordLevel),
  // never the unknown or an added token; none for a word over 64 bytes.
  std::vector<std::string> nearest_words(const std::string& word, std::size_t count) const;

  // Text of `ids`: byte-level pieces are joined and decoded as UTF-8, each
  // ill-formed stretch becoming U+FFFD; an added token contributes its
  // content verbatim and ends the byte stream before it. skip_special_tokens
  // drops the tokens marked special (then the bytes on both sides join).
  // WordLevel joins tokens with spaces (the library's behaviour without a
  // decoder). An id outside the vocabulary is an error.
  std::string decode(std::span<const int64_t> ids, bool skip_special_tokens) const;

  // Id of a token by its exact content (added tokens first, then the
  // vocabulary).
  std::optional<int64_t> token_id(const std::string& content) const;
  // Largest id + 1.
  int64_t vocab_size() const;
  ModelKind model_kind() const;
  // The path (or label) it was loaded from, for messages.
  const std::string& label() const;

 private:
  explicit Tokenizer(std::shared_ptr<const TokenizerImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const TokenizerImpl> impl_;  // immutable and shared: copies are cheap
};

}  // namespace stepmix::text
