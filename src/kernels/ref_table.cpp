// The reference variant's KernelSet: runs on any CPU, defines every result.
#include "kernels/tables.hpp"

namespace stepmix::kernels {
namespace {

bool always_supported() { return true; }

}  // namespace

const KernelSet& ref_kernel_set() {
  static const KernelSet set{
      "ref",
      {always_supported, ref::quantize_e4m3_f32, ref::quantize_e4m3_bf16, ref::dequantize_e4m3_to_bf16, ref::gemm},
      {always_supported, ref::attention_blocked, ref::attention_blocked_bf16},
      {always_supported, ref::rms_norm, ref::rms_norm_bf16, ref::head_norm_rotary, ref::head_norm_rotary_bf16,
       ref::silu_gate, ref::silu_gate_bf16, ref::relu_squared, ref::relu_squared_bf16, ref::add, ref::add_bf16,
       ref::widen_bf16, ref::round_bf16},
      {always_supported, ref::conv3d, ref::channel_rms_norm},
  };
  return set;
}

}  // namespace stepmix::kernels
