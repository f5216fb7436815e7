// JSONL requests for the checking commands (`tokenize`, `prompt`): one JSON
// object per line, answered by one JSON line each, in order.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace stepmix::text {

// Calls handle(label, object) for every non-empty line of `path` ("-" is
// standard input), label being "<path>: line <n>". A line that is not
// well-formed UTF-8, not JSON or not an object throws
// stepmix::Error(component, "<label>: ..."), so the command stops with one
// line on stderr after the answers to the lines before it.
void for_each_jsonl_object(const std::string& path, const std::string& component,
                           const std::function<void(const std::string& label, const nlohmann::json& object)>& handle);

// One answer line: `out` as ASCII-only JSON (non-ASCII as \u escapes, as the
// reference files are written) and a newline, written whole.
void print_json_line(std::FILE* f, const nlohmann::ordered_json& out);

}  // namespace stepmix::text
