// Convolution kernels of the video VAE: one 3-D convolution over a list of
// frames, covering every convolution the Wan VAE has (causal 3×3×3, 3×1×1 in
// time with stride 1 or 2, 2-D 3×3 per frame with stride 1 or 2, 1×1×1).
//
// Layout. Feature maps are channels-last frames: one frame is [H][W][C]
// (C contiguous). In that layout a convolution is an implicit GEMM,
//   y[t][p][o] = bias[o] + Σ_tap Σ_i x[t·stride_t + a][p·stride + (b, c) − pad][i] · W[o][i][a][b][c],
// whose K (tap, input channel) runs over contiguous channel vectors and whose
// output rows are the frame's positions; no im2col copy is needed.
//
// Frames are passed as pointers, one per input frame in time order. A null
// pointer is a frame of zeros: the causal front padding (and an empty cache)
// is expressed that way, and the kernels skip its taps instead of multiplying
// zeros (for an image, a causal 3×3×3 convolution does the work of a 2-D
// 3×3 one). Spatial zero padding is expressed by pad_top/pad_left and the
// output size; taps that would read it are skipped too.
//
// Arithmetic.
//   F32:  float32 frames and weights, float32 products and sums.
//   BF16: bf16 frames and weights (the weights rounded once when packed),
//         exact products, float32 sums (vdpbf16ps).
// Summation order: taps in (a, b, c) order, then input channels ascending
// (the reference and AVX-512; the AMX tiles run tap columns inside 256-channel
// chunks, and sum 32 products per tile multiply in the hardware's order, so
// they differ by float32 rounding); the epilogue adds the bias, then the
// residual (two roundings), then converts to the output type. Results do not
// depend on the thread count.
//
// Weights are packed once (pack_conv_weights) into one layout that every CPU
// variant reads: output channels in blocks of up to kConvBlock, the last
// block narrowed to a multiple of 16,
//   F32:  [block][tap][c_in][width]
//   BF16: [block][tap][c_in/2][width][2]      (pairs of input channels)
// with zeros in the padding (c_out up to the block width, c_in up to even).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/linear_kernels.hpp"

namespace stepmix::kernels {

enum class FrameElement { F32, BF16 };

// Output channels per packed block (the widest AVX-512 micro-kernel: 4 zmm).
constexpr int64_t kConvBlock = 64;

struct ConvWeights {
  int64_t c_out = 0, c_in = 0;
  int kt = 1, kh = 1, kw = 1;
  GemmArithmetic arithmetic = GemmArithmetic::F32;
  std::vector<float> f32;       // F32 arithmetic
  std::vector<uint16_t> bf16;   // BF16 arithmetic
  std::vector<float> bias;      // [c_out]; zeros when the layer has none

  int taps() const { return kt * kh * kw; }
  // Input channels as packed: c_in, rounded up to even for BF16 pairs.
  int64_t c_in_packed() const { return arithmetic == GemmArithmetic::BF16 ? (c_in + 1) / 2 * 2 : c_in; }
  int64_t blocks() const { return (c_out + kConvBlock - 1) / kConvBlock; }
  // Lanes of block b: kConvBlock, or the rest rounded up to 16 for the last.
  int64_t block_width(int64_t b) const {
    const int64_t rest = c_out - b * kConvBlock;
    return rest >= kConvBlock ? kConvBlock : (rest + 15) / 16 * 16;
  }
  // First element of block b in f32 / bf16 (blocks before it are full width).
  int64_t block_offset(int64_t b) const { return b * kConvBlock * taps() * c_in_packed(); }
  // Bytes the packed form takes (from the sizes alone, packed or not yet).
  std::size_t packed_bytes() const {
    const int64_t elements = block_offset(blocks() - 1) + block_width(blocks() - 1) * taps() * c_in_packed();
    return std::size_t(elements) * (arithmetic == GemmArithmetic::BF16 ? 2 : 4) + std::size_t(c_out) * 4;
  }
};

// Packs weights in PyTorch layout w[c_out][c_in][kt][kh][kw] (float32, or
// bf16 bits when `w_is_bf16`) and an optional bias [c_out] (float32, null for
// none). BF16 arithmetic rounds float32 weights to bf16 (nearest even).
ConvWeights pack_conv_weights(const void* w, bool w_is_bf16, int64_t c_out, int64_t c_in, int kt, int kh, int kw,
                              const float* bias, GemmArithmetic arithmetic);

// The packed weight of (o, i, a, b, c) as float32 (for tests and the reference).
float packed_conv_weight(const ConvWeights& w, int64_t o, int64_t i, int a, int b, int c);

struct Conv3dArgs {
  const ConvWeights* weights = nullptr;
  int64_t h_in = 0, w_in = 0;    // input frame size
  int64_t h_out = 0, w_out = 0;  // output frame size
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_left = 0;  // zero rows/columns before the input; those after follow from h_out, w_out
  int64_t frames_out = 1;
  int stride_t = 1;
  // (frames_out − 1)·stride_t + kt input frames in time order, each
  // [h_in][w_in][c_in] of x_type (F32 for F32 arithmetic, BF16 for BF16);
  // null = a frame of zeros. Output frame t reads frames t·stride_t + a, a < kt.
  const void* const* x_frames = nullptr;
  FrameElement x_type = FrameElement::F32;
  // Optional float32 frames [h_out][w_out][c_out] added in the epilogue
  // (null array, or null entries, for none). May alias y_frames (F32 only).
  const float* const* residual_frames = nullptr;
  // frames_out output frames [h_out][w_out][c_out] of y_type.
  void* const* y_frames = nullptr;
  FrameElement y_type = FrameElement::F32;
};

// Throws stepmix::Error("kernels", ...) naming what does not fit together.
void validate_conv3d(const Conv3dArgs& args);

// Multiply-accumulates the call performs (taps on zero frames and padding
// skipped), for benchmarks: 2× this is its FLOP count.
double conv3d_macs(const Conv3dArgs& args);

// Scalar reference: plain loops over (o, position), taps and channels in the
// order above. The oracle of the other variants.
namespace ref {
void conv3d(const Conv3dArgs& args);
}

// AVX-512 (F32: FMA; BF16: AVX512_BF16), multithreaded on the global thread
// pool. Needs CpuFeatures::can_run_avx512_bf16().
namespace avx512 {
void conv3d(const Conv3dArgs& args);
}

// AMX-BF16 tiles for BF16 arithmetic with c_in a multiple of 32, where the
// CPU and Linux allow AMX; everything else goes to avx512::conv3d.
namespace amx {
void conv3d(const Conv3dArgs& args);
bool conv3d_applies(const Conv3dArgs& args);
}

// One conv3d variant (tests and benchmarks hold them as values); the one
// that runs is kernel_set.hpp's active_convolution().conv3d.
using Conv3dFunction = void (*)(const Conv3dArgs&);

}  // namespace stepmix::kernels
