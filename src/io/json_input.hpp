// Reading the JSON side files of a checkpoint (config.json, the shard index,
// scheduler_config.json, tokenizer.json, model_index.json) and safetensors
// headers without trusting them: a size limit checked before a byte is read,
// and a nesting limit checked before the text is parsed.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace stepmix {

// Far above any real side file (a Qwen tokenizer.json is ~11 MiB).
inline constexpr std::uint64_t kMaxJsonFileBytes = 256ull << 20;
// The deepest legitimate document stepmix reads nests fewer than ten levels.
// nlohmann::json parses iteratively, but dump(), copies and comparisons
// recurse, so a document nested a million levels deep would overflow the
// stack as soon as an error message quoted it.
inline constexpr int kMaxJsonDepth = 64;

// The contents of `path`, which must be a regular file of at most `max_bytes`
// (so a FIFO or /dev/zero cannot hang or exhaust memory). Throws
// stepmix::Error(component, "<path>: ...").
std::string read_small_file(const std::string& path, const std::string& component,
                            std::uint64_t max_bytes = kMaxJsonFileBytes);

// Throws stepmix::Error(component, "<label>: JSON nested deeper than N levels")
// when arrays/objects in `text` nest deeper than `max_depth`. A linear scan
// that skips strings; it does not otherwise validate the text (the parser
// does that afterwards).
void check_json_nesting(std::string_view text, const std::string& label, const std::string& component,
                        int max_depth = kMaxJsonDepth);

// check_json_nesting, then parse. Every nlohmann exception (a syntax error,
// or out_of_range for a number such as 1e400) becomes
// stepmix::Error(component, "<label>: not valid JSON: ...").
nlohmann::json parse_json_text(std::string_view text, const std::string& label, const std::string& component);

}  // namespace stepmix
