// The Linears' own kernels: E4M3 activation quantization (W8A8), FP8 weight
// decode to bf16 (W8A16), and the float32-bias epilogue of the GEMMs.
// Memory-bound: 8 consecutive elements per thread with 16-byte (activation,
// bf16) and 8-byte (code) accesses when the pointers allow it.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/device_numerics.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gemm_epilogue.hpp"

namespace stepmix::cuda {
namespace {

using namespace detail;

__device__ __forceinline__ uint8_t quantize_one(float x, float input_scale) {
  return quantize_e4m3_saturating(__fdiv_rn(x, input_scale));
}

__device__ __forceinline__ uint32_t pack4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return uint32_t(a) | (uint32_t(b) << 8) | (uint32_t(c) << 16) | (uint32_t(d) << 24);
}

struct QuantizeF32 {
  const float* x;
  float scale;
  uint8_t* codes;
  __device__ void one(int64_t i) const { codes[i] = quantize_one(x[i], scale); }
  __device__ void eight(int64_t g) const {
    const float4 a = reinterpret_cast<const float4*>(x)[2 * g];
    const float4 b = reinterpret_cast<const float4*>(x)[2 * g + 1];
    reinterpret_cast<uint2*>(codes)[g] = make_uint2(
        pack4(quantize_one(a.x, scale), quantize_one(a.y, scale), quantize_one(a.z, scale), quantize_one(a.w, scale)),
        pack4(quantize_one(b.x, scale), quantize_one(b.y, scale), quantize_one(b.z, scale), quantize_one(b.w, scale)));
  }
};

struct QuantizeBf16 {
  const uint16_t* x;
  float scale;
  uint8_t* codes;
  // Two bf16 (low half first) → two codes in the low 16 bits.
  __device__ uint32_t pair(uint32_t two) const {
    return uint32_t(quantize_one(bf16_to_float(uint16_t(two & 0xFFFFu)), scale)) |
           (uint32_t(quantize_one(bf16_to_float(uint16_t(two >> 16)), scale)) << 8);
  }
  __device__ void one(int64_t i) const { codes[i] = quantize_one(bf16_to_float(x[i]), scale); }
  __device__ void eight(int64_t g) const {
    const uint4 in = reinterpret_cast<const uint4*>(x)[g];
    reinterpret_cast<uint2*>(codes)[g] = make_uint2(pair(in.x) | (pair(in.y) << 16), pair(in.z) | (pair(in.w) << 16));
  }
};

__device__ __forceinline__ uint16_t decode_one(uint8_t code, float scale) {
  return float_to_bf16_rne(__fmul_rn(e4m3_to_float(code), scale));
}

struct Decode {
  const uint8_t* codes;
  float scale;
  uint16_t* out;
  // Codes 2h and 2h+1 of four → two bf16, the first in the low half.
  __device__ uint32_t pair(uint32_t four, int h) const {
    return uint32_t(decode_one(uint8_t(four >> (16 * h)), scale)) |
           (uint32_t(decode_one(uint8_t(four >> (16 * h + 8)), scale)) << 16);
  }
  __device__ void one(int64_t i) const { out[i] = decode_one(codes[i], scale); }
  __device__ void eight(int64_t g) const {
    const uint2 in = reinterpret_cast<const uint2*>(codes)[g];
    reinterpret_cast<uint4*>(out)[g] = make_uint4(pair(in.x, 0), pair(in.x, 1), pair(in.y, 0), pair(in.y, 1));
  }
};

struct AddBiasRound {
  const float* acc;
  const float* bias;
  int64_t N;
  uint16_t* y;
  __device__ void one(int64_t i) const { y[i] = float_to_bf16_rne(__fadd_rn(acc[i], bias[i % N])); }
};

void check_pointers(const char* function, int64_t count, const void* in, const void* out) {
  require(count == 0 || (in && out), function, "null device pointer");
}

}  // namespace

void quantize_e4m3_f32(const float* x, int64_t count, float input_scale, uint8_t* codes, StreamHandle stream) {
  check_pointers("quantize_e4m3_f32", count, x, codes);
  launch_each_by_eight("quantize_e4m3_f32", QuantizeF32{x, input_scale, codes}, count,
                       aligned(x, 16) && aligned(codes, 8), stream);
}

void quantize_e4m3_bf16(const uint16_t* x, int64_t count, float input_scale, uint8_t* codes, StreamHandle stream) {
  check_pointers("quantize_e4m3_bf16", count, x, codes);
  launch_each_by_eight("quantize_e4m3_bf16", QuantizeBf16{x, input_scale, codes}, count,
                       aligned(x, 16) && aligned(codes, 8), stream);
}

void dequantize_e4m3_to_bf16(const uint8_t* codes, int64_t count, float weight_scale, uint16_t* out,
                             StreamHandle stream) {
  check_pointers("dequantize_e4m3_to_bf16", count, codes, out);
  launch_each_by_eight("dequantize_e4m3_to_bf16", Decode{codes, weight_scale, out}, count,
                       aligned(codes, 8) && aligned(out, 16), stream);
}

namespace detail {

void add_bias_round_bf16(const float* acc, const float* bias, int64_t rows, int64_t N, uint16_t* y,
                         StreamHandle stream) {
  launch_each("add_bias_round_bf16", AddBiasRound{acc, bias, N, y}, rows * N, stream);
}

}  // namespace detail

}  // namespace stepmix::cuda
