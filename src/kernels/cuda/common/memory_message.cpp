// The wording of the up-front memory check; plain host code, built with and
// without CUDA.
#include <cstdio>

#include "kernels/cuda/cuda_device.hpp"

namespace stepmix::cuda {

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

std::string memory_shortfall_message(std::size_t needed_bytes, const MemoryInfo& memory, const std::string& what) {
  return what + ": needs " + format_bytes(needed_bytes) + " of GPU memory, " + format_bytes(memory.free_bytes) +
         " free of " + format_bytes(memory.total_bytes);
}

}  // namespace stepmix::cuda
