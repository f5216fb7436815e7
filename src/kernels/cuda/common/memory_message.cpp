// The wording of the up-front memory check; plain host code, built with and
// without CUDA.
#include "kernels/cuda/cuda_device.hpp"

namespace stepmix::cuda {

std::string memory_shortfall_message(std::size_t needed_bytes, const MemoryInfo& memory, const std::string& what) {
  return what + ": needs " + format_bytes(needed_bytes) + " of GPU memory, " + format_bytes(memory.free_bytes) +
         " free of " + format_bytes(memory.total_bytes);
}

}  // namespace stepmix::cuda
