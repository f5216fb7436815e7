// The AVX-512 (+AVX512_BF16) kernel variant: table entry and CPU check.
#include "core/cpu_features.hpp"
#include "kernels/cpu/avx512_kernels.hpp"

namespace stepmix::kernels {

namespace {
bool avx512_supported() { return cpu_features().can_run_avx512_bf16(); }
}  // namespace

extern const KernelSet kAvx512Kernels;
const KernelSet kAvx512Kernels{
    "avx512",
    avx512_supported,
    avx512::quantize_e4m3_f32,
    avx512::quantize_e4m3_bf16,
    avx512::dequantize_e4m3_to_bf16,
    avx512::gemm,
};

}  // namespace stepmix::kernels
