// Reading the JSON side files of a checkpoint (config.json, the shard index,
// scheduler_config.json, tokenizer.json, model_index.json) and safetensors
// headers without trusting them: a size limit checked before a byte is read,
// a nesting limit checked before the text is parsed, and no duplicate keys
// (nlohmann keeps the last of two silently, so a file could say one thing to
// stepmix and another to a reader that keeps the first).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
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
// stepmix::Error(component, "<path>: ...") (io/file_access.hpp).
std::string read_small_file(const std::string& path, const std::string& component,
                            std::uint64_t max_bytes = kMaxJsonFileBytes);

// Throws stepmix::Error(component, "<label>: JSON nested deeper than N levels")
// when arrays/objects in `text` nest deeper than `max_depth`. A linear scan
// that skips strings; it does not otherwise validate the text (the parser
// does that afterwards).
void check_json_nesting(std::string_view text, const std::string& label, const std::string& component,
                        int max_depth = kMaxJsonDepth);

// A key found twice in one object: the key, and where the object is
// ("" for the top level, else e.g. "quantization_config.config_groups" or
// "added_tokens[]").
struct DuplicateJsonKey {
  std::string key;
  std::string object_path;
};

// Parses `text` into `out` and returns the first duplicate key, if any.
// Throws nlohmann::json::exception on a syntax error (no nesting check).
std::optional<DuplicateJsonKey> parse_json_detecting_duplicates(std::string_view text, nlohmann::json& out);

// check_json_nesting, then parse; a duplicate key is an error
// ("<label>: key \"k\" appears twice in the object at a.b"). Every nlohmann
// exception (a syntax error, or out_of_range for a number such as 1e400)
// becomes stepmix::Error(component, "<label>: not valid JSON: ...").
nlohmann::json parse_json_text(std::string_view text, const std::string& label, const std::string& component);

// A JSON integer within [lo, hi], read without wrapping (2^64 − 1 is an
// unsigned JSON number; get<int64_t>() would make it −1). nullopt for
// anything else: out of range, a float, a bool, a string.
std::optional<std::int64_t> json_integer_in(const nlohmann::json& value, std::int64_t lo, std::int64_t hi);

// A value as a message shows it: compact JSON text, invalid UTF-8 replaced,
// cut to 60 characters ("..." at the end when cut).
std::string json_excerpt(const nlohmann::json& value);

}  // namespace stepmix
