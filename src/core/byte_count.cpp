#include "core/byte_count.hpp"

#include <cstdio>

namespace stepmix {

std::string format_bytes(std::size_t bytes) {
  char text[48];
  if (bytes >= (std::size_t(1) << 30))
    std::snprintf(text, sizeof text, "%.2f GiB", double(bytes) / double(1ull << 30));
  else if (bytes >= (std::size_t(1) << 20))
    std::snprintf(text, sizeof text, "%.2f MiB", double(bytes) / double(1ull << 20));
  else
    std::snprintf(text, sizeof text, "%zu bytes", bytes);
  return text;
}

}  // namespace stepmix
