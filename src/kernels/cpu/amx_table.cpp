// The AMX variant's KernelSet: the GEMM and the convolution with BF16
// arithmetic and bf16 attention on AMX tiles; quantization, FP32 arithmetic,
// float32 attention, pointwise and the channel norm are the AVX-512 variant's.
#include "kernels/cpu/amx_kernels.hpp"
#include "kernels/cpu/avx512_kernels.hpp"
#include "kernels/tables.hpp"

namespace stepmix::kernels {

const KernelSet& amx_kernel_set() {
  static const KernelSet set = [] {
    KernelSet s = avx512_kernel_set();
    s.name = "amx";
    s.linear.supported = amx::supported;
    s.linear.gemm = amx::gemm;
    s.attention.supported = [] { return amx::supported() && avx512_kernel_set().attention.supported(); };
    s.attention.bf16 = amx::attention_bf16;
    s.convolution.supported = amx::supported;
    s.convolution.conv3d = amx::conv3d;
    return s;
  }();
  return set;
}

}  // namespace stepmix::kernels
