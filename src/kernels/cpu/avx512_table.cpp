// The AVX-512 variant's KernelSet: each family with the CPU features it needs.
#include "core/cpu_features.hpp"
#include "kernels/cpu/avx512_kernels.hpp"
#include "kernels/tables.hpp"

namespace stepmix::kernels {
namespace {

bool linear_supported() { return cpu_features().can_run_avx512_bf16(); }

bool attention_supported() {
  const CpuFeatures& cpu = cpu_features();
  return cpu.avx512f && cpu.fma && cpu.os_saves_avx512_state;
}

bool pointwise_supported() {
  const CpuFeatures& cpu = cpu_features();
  return cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.fma && cpu.os_saves_avx512_state;
}

}  // namespace

const KernelSet& avx512_kernel_set() {
  static const KernelSet set{
      "avx512",
      {linear_supported, avx512::quantize_e4m3_f32, avx512::quantize_e4m3_bf16, avx512::dequantize_e4m3_to_bf16,
       avx512::gemm},
      {attention_supported, avx512::attention_f32, avx512::attention_bf16},
      {pointwise_supported, ref::rms_norm, avx512::rms_norm_bf16, ref::head_norm_rotary, avx512::head_norm_rotary_bf16,
       ref::silu_gate, avx512::silu_gate_bf16, ref::relu_squared, avx512::relu_squared_bf16, ref::add,
       avx512::add_bf16, avx512::widen_bf16, avx512::round_bf16},
      // The convolution's BF16 path is vdpbf16ps, as the GEMM's.
      {linear_supported, avx512::conv3d, avx512::channel_rms_norm},
  };
  return set;
}

}  // namespace stepmix::kernels
