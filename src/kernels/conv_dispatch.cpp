// The convolution variant that goes with the active kernel set.
#include <cstring>

#include "kernels/conv_kernels.hpp"

namespace stepmix::kernels {

Conv3dFunction active_conv3d() {
  // Every variant but the reference runs on AVX-512 (the AMX set uses the
  // AVX-512 functions for everything but its BF16 GEMM).
  static const Conv3dFunction chosen = std::strcmp(active_kernels().name, "ref") == 0 ? ref::conv3d : avx512::conv3d;
  return chosen;
}

}  // namespace stepmix::kernels
