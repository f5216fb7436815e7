// tokenizer.json parsed in one pass: a JSON tree for the settings, and the
// two large members — model.vocab (151,643 entries for Qwen3) and
// model.merges (151,387) — captured straight into compact arrays. Building
// them as JSON values first would make loading an 11 MB Qwen tokenizer
// several times slower (half a million small allocations built and freed).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stepmix::text {

struct TokenizerDocument {
  // Everything else; model.vocab and model.merges are null placeholders
  // where they were present.
  nlohmann::json doc;

  struct Vocab {
    bool present = false, is_object = false;
    std::vector<std::pair<std::string, int64_t>> entries;  // in file order
    std::optional<std::string> error;  // the first bad entry, as "model.vocab.<token>: ..."
  } vocab;

  struct Merges {
    bool present = false, is_array = false;
    std::vector<std::pair<std::string, std::string>> pairs;  // in rank order, either form
    std::optional<std::string> error;  // the first bad entry, as "model.merges[i]: ..."
  } merges;
};

// Token ids index an embedding table, so they are bounded well below the
// int64 range (vocab_size = max id + 1 must not overflow).
inline constexpr int64_t kMaxTokenId = (int64_t(1) << 31) - 1;
inline const std::string kMaxIdText = std::to_string(kMaxTokenId);  // for messages

// Checks the nesting depth first, as every JSON side file is read; throws
// stepmix::Error("tokenizer", "<label>: not valid JSON: ...") on a syntax
// error.
TokenizerDocument parse_tokenizer_document(std::string_view text, const std::string& label);

}  // namespace stepmix::text
