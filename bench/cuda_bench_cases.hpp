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
inline void run_case(const std::string& fields, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    ++failed_cases();
    std::printf("{\"impl\": \"stepmix\", %s, \"error\": %s}\n", fields.c_str(), json_quoted(e.what()).c_str());
    std::fflush(stdout);
    std::fprintf(stderr, "case failed (%s): %s\n", fields.c_str(), e.what());
  }
}

// A case of something the run measures without depending on it (cuDNN's
// attention, which a machine may lack): its failure is printed like
// run_case's, with "optional": true, and not counted.
inline void run_optional_case(const std::string& fields, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    std::printf("{\"impl\": \"stepmix\", %s, \"optional\": true, \"error\": %s}\n", fields.c_str(),
                json_quoted(e.what()).c_str());
    std::fflush(stdout);
    std::fprintf(stderr, "optional case failed (%s): %s\n", fields.c_str(), e.what());
  }
}

}  // namespace stepmix::bench
