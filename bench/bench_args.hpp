// Command-line parsing shared by the C++ benchmarks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stepmix::bench {

// "44160,1024" → {44160, 1024} (std::stoll on each item: a bad one throws).
inline std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = text.find(',', start);
    out.push_back(std::stoll(text.substr(start, end - start)));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace stepmix::bench
