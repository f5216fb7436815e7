// Small byte-level BPE tokenizer.json files built in the tests: the 256 byte
// symbols first (so without merges a byte's id is its value), then one entry
// per merge result, ids in order.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "text/byte_level.hpp"

namespace stepmix::test {

// The pre-tokenizer regex of the Qwen2/Qwen3 tokenizers.
inline const char* kQwenSplit =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

inline nlohmann::json split_step(const std::string& regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}
inline nlohmann::json byte_level_step() {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
}
inline nlohmann::json added_token(int id, const std::string& content, bool special = true) {
  return {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
          {"normalized", false}, {"special", special}};
}

// Merges as [a, b] pairs of byte-level strings ("Ġ" is the space).
inline nlohmann::json tiny_bpe(const std::vector<std::pair<std::string, std::string>>& merges,
                               nlohmann::json added = nlohmann::json::array()) {
  nlohmann::json vocab = nlohmann::json::object();
  int next = 0;
  for (const std::string& s : text::byte_level_symbols()) vocab[s] = next++;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
    list.push_back({a, b});
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", std::move(added)},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {split_step(kQwenSplit), byte_level_step()}}}},
          {"post_processor", byte_level_step()},
          {"decoder", byte_level_step()},
          {"model",
           {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
            {"vocab", vocab}, {"merges", list}}}};
}

}  // namespace stepmix::test
