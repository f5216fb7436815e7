// The CUDA FP8 kernels bit for bit against the CPU reference kernels (like
// every GPU test, also run on the CPU's SIMT emulator by test_cuda_on_cpu): the
// W8A8 activation quantizer from float32 and bf16 (every E4M3 value and
// midpoint, quotients a few ulps from each midpoint under awkward scales,
// every bf16 bit pattern, random data) and the W8A16 weight decode (every
// code under several scales). Both the 16-byte vector path and the scalar
// path (misaligned pointers) are exercised, and nothing is written past the
// end.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/e4m3_inputs.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/linear_kernels.hpp"

namespace stepmix::test {
namespace {

class CudaQuantize : public CudaTest {};

// Quantizes x[offset, offset + count) on the device into codes at the same
// offset of a poisoned buffer; returns all count + 1 codes from there.
std::vector<uint8_t> device_quantize_f32(const std::vector<float>& x, int64_t offset, int64_t count, float scale) {
  cuda::DeviceBuffer in = to_device(x);
  cuda::DeviceBuffer out = poisoned<uint8_t>(x.size() + 1);
  cuda::quantize_e4m3_f32(in.as<float>() + offset, count, scale, out.as<uint8_t>() + offset, nullptr);
  const auto all = to_host<uint8_t>(out, x.size() + 1);
  return {all.begin() + offset, all.begin() + offset + count + 1};
}

TEST_F(CudaQuantize, F32ActivationCodesMatchTheCpuQuantizerBitForBit) {
  const std::vector<float> x = e4m3_tricky_inputs();
  for (float scale : {1.0f, 0.0217f, 3.0f, 1e-3f}) {
    for (int64_t offset : {0, 3}) {  // 3: misaligned, the scalar kernel
      const int64_t count = int64_t(x.size()) - offset - 5;
      const std::vector<uint8_t> codes = device_quantize_f32(x, offset, count, scale);
      std::vector<uint8_t> want(static_cast<size_t>(count));
      kernels::ref::quantize_e4m3_f32(x.data() + offset, count, scale, want.data());
      for (int64_t i = 0; i < count; ++i)
        ASSERT_EQ(codes[size_t(i)], want[size_t(i)]) << "x=" << x[size_t(offset + i)] << " scale=" << scale;
      EXPECT_EQ(codes[size_t(count)], 0xA5) << "wrote past the end";
    }
  }
}

TEST_F(CudaQuantize, QuotientsNextToMidpointsMatchBitForBit) {
  for (float scale : e4m3_awkward_scales()) {
    const std::vector<float> x = quotients_next_to_e4m3_midpoints(scale);
    const std::vector<uint8_t> codes = device_quantize_f32(x, 0, int64_t(x.size()), scale);
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(codes[i], quantize_e4m3_saturating(x[i] / scale)) << "x=" << x[i] << " scale=" << scale;
  }
}

TEST_F(CudaQuantize, EveryBf16PatternMatchesBitForBit) {
  std::vector<uint16_t> x;
  for (uint32_t h = 0; h < 0x10000; ++h) x.push_back(uint16_t(h));  // NaNs and infinities included
  for (int rep = 0; rep < 3; ++rep)
    for (uint16_t h : normal_bf16(30011, 40 + rep, 10.0f)) x.push_back(h);
  cuda::DeviceBuffer in = to_device(x);
  for (float scale : {1.0f, 0.0217f, 7.5f, 1e-39f}) {
    for (int64_t offset : {0, 1}) {
      const int64_t count = int64_t(x.size()) - offset - 3;
      cuda::DeviceBuffer out = poisoned<uint8_t>(x.size());
      cuda::quantize_e4m3_bf16(in.as<uint16_t>() + offset, count, scale, out.as<uint8_t>() + offset, nullptr);
      const auto codes = to_host<uint8_t>(out, x.size());
      std::vector<uint8_t> want(static_cast<size_t>(count));
      kernels::ref::quantize_e4m3_bf16(x.data() + offset, count, scale, want.data());
      for (int64_t i = 0; i < count; ++i)
        ASSERT_EQ(codes[size_t(offset + i)], want[size_t(i)]) << "bf16=0x" << std::hex << x[size_t(offset + i)];
      EXPECT_EQ(codes[size_t(offset + count)], 0xA5) << "wrote past the end";
    }
  }
}

TEST_F(CudaQuantize, WeightDecodeMatchesBitForBit) {
  std::vector<uint8_t> codes;
  for (int rep = 0; rep < 5; ++rep)
    for (int c = 0; c < 256; ++c) codes.push_back(uint8_t((c * 37 + rep) & 0xFF));
  cuda::DeviceBuffer in = to_device(codes);
  for (float scale : {1.0f, 0.0123f, 2.5e-4f, 1.7e-38f, 3e30f}) {
    for (int64_t offset : {0, 5}) {
      const int64_t count = int64_t(codes.size()) - offset - 7;
      cuda::DeviceBuffer out = poisoned<uint16_t>(codes.size());
      cuda::dequantize_e4m3_to_bf16(in.as<uint8_t>() + offset, count, scale, out.as<uint16_t>() + offset, nullptr);
      const auto got = to_host<uint16_t>(out, codes.size());
      std::vector<uint16_t> want(static_cast<size_t>(count));
      kernels::ref::dequantize_e4m3_to_bf16(codes.data() + offset, count, scale, want.data());
      for (int64_t i = 0; i < count; ++i) {
        const uint16_t g = got[size_t(offset + i)], w = want[size_t(i)];
        // NaN codes included: the same NaN, sign and payload.
        ASSERT_EQ(g, w) << "code 0x" << std::hex << int(codes[size_t(offset + i)]) << " scale " << scale;
      }
      EXPECT_EQ(got[size_t(offset + count)], 0xA5A5) << "wrote past the end";
    }
  }
}

}  // namespace
}  // namespace stepmix::test
