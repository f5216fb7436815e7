// The VAE kernel variants that go with the active kernel set.
#include <atomic>
#include <cstring>

#include "kernels/channel_norm_kernels.hpp"
#include "kernels/conv_kernels.hpp"

namespace stepmix::kernels {
namespace {
std::atomic<Conv3dFunction> g_override{nullptr};
}  // namespace

Conv3dFunction active_conv3d() {
  if (const Conv3dFunction f = g_override.load(std::memory_order_relaxed)) return f;
  // The AMX set runs BF16 convolutions on tiles (and everything else on
  // AVX-512, as its GEMM does); the AVX-512 set everything on AVX-512.
  static const Conv3dFunction chosen = [] {
    const char* name = active_kernels().name;
    if (std::strcmp(name, "ref") == 0) return Conv3dFunction(ref::conv3d);
    if (std::strcmp(name, "amx") == 0) return Conv3dFunction(amx::conv3d);
    return Conv3dFunction(avx512::conv3d);
  }();
  return chosen;
}

void override_active_conv3d(Conv3dFunction f) { g_override.store(f, std::memory_order_relaxed); }

ChannelNormFunction active_channel_rms_norm() {
  static const ChannelNormFunction chosen =
      std::strcmp(active_kernels().name, "ref") == 0 ? ref::channel_rms_norm : avx512::channel_rms_norm;
  return chosen;
}

}  // namespace stepmix::kernels
