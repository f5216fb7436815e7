// What a loaded tokenizer.json becomes (filled by tokenizer_json.cpp, run by
// tokenizer.cpp). Private to src/text.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/added_tokens.hpp"
#include "text/bpe.hpp"
#include "text/tokenizer.hpp"
#include "text/unicode.hpp"

namespace stepmix::text {

struct TokenizerImpl {
  std::string label;
  ModelKind kind = ModelKind::word_level;
  int64_t vocab_size = 0;

  // Normaliser: NFC (BPE) or Lowercase (WordLevel), or none.
  bool nfc = false;
  bool lowercase = false;

  // WordLevel: vocabulary, unk token, and the words of the pre-tokenizer as
  // the matches of one regex: Whitespace (\w+|[^\w\s]+) or WhitespaceSplit
  // (runs of anything but White_Space), with Rust's Unicode classes.
  std::unordered_map<std::string, int64_t> word_vocab;
  std::optional<int64_t> unk_id;
  std::unique_ptr<Regex> words;

  // BPE: the Split regexes, applied in order, then the byte-level model.
  std::vector<std::unique_ptr<Regex>> splits;
  std::unique_ptr<BpeModel> bpe;

  // Added tokens, matched in the raw and in the normalised text.
  std::vector<AddedToken> added;
  AddedTokenMatcher raw_added, normalized_added;
  std::unordered_map<int64_t, std::size_t> added_by_id;  // id -> index in `added`

  // Model vocabulary, sorted by id.
  std::vector<std::pair<int64_t, std::string>> id_to_token;
};

// The vocabulary entry of `id`, or nullptr.
inline const std::string* vocab_token(const TokenizerImpl& t, int64_t id) {
  const auto it = std::lower_bound(t.id_to_token.begin(), t.id_to_token.end(), id,
                                   [](const std::pair<int64_t, std::string>& e, int64_t v) { return e.first < v; });
  return it != t.id_to_token.end() && it->first == id ? &it->second : nullptr;
}

// Parses and checks a tokenizer.json (tokenizer_json.cpp).
std::shared_ptr<const TokenizerImpl> load_tokenizer_json(std::string_view text, const std::string& label);

}  // namespace stepmix::text
