// One failing case of a CUDA benchmark (a shape cuBLASLt has no algorithm
// for, memory) must not cost the cases after it: the first GPU runs are
// short and rare. (A kernel fault is sticky: every later case then fails
// too, each with its record.) run_case runs one, and on an exception prints one JSON
// line {"impl": "stepmix", <fields>, "error": "<what>"} (bench/cuda_summary.py
// lists such records) and counts it; the program's exit status is then 1.
#pragma once

#include <cstdio>
#include <exception>
#include <functional>
#include <string>

namespace stepmix::bench {

// Text for a JSON string.
inline std::string json_quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", unsigned(c));
      out += escaped;
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

inline int& failed_cases() {
  static int failures = 0;
  return failures;
}

// `fields`: the case's JSON fields, e.g. "\"bench\": \"linear\", \"mode\": \"W8A8\"".
// An optional case measures what the run does not depend on (cuDNN's
// attention, which a machine may lack): its failure is printed with
// "optional": true and not counted.
inline void run_case(const std::string& fields, const std::function<void()>& body, bool optional = false) {
  try {
    body();
  } catch (const std::exception& e) {
    if (!optional) ++failed_cases();
    std::printf("{\"impl\": \"stepmix\", %s%s, \"error\": %s}\n", fields.c_str(),
                optional ? ", \"optional\": true" : "", json_quoted(e.what()).c_str());
    std::fflush(stdout);
    std::fprintf(stderr, "%scase failed (%s): %s\n", optional ? "optional " : "", fields.c_str(), e.what());
  }
}


}  // namespace stepmix::bench
