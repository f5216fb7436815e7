// Elementwise kernels of every supported variant, bit for bit against the
// scalar definitions in core/numerics.hpp: activation quantization (W8A8,
// float32 division then quantize_e4m3_saturating) and the W8A16 weight
// dequantization bf16(float32(decode(code) · s_w)).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/e4m3_inputs.hpp"
#include "core/numerics.hpp"
#include "kernels/kernel_set.hpp"

namespace stepmix::kernels {
namespace {

TEST(QuantizeVariants, F32ActivationCodesAreBitExact) {
  const std::vector<float> x = test::e4m3_tricky_inputs();
  for (const KernelSet& variant : kernel_variants()) {
    if (!variant.linear.supported()) continue;
    for (float scale : {1.0f, 0.0217f, 3.0f, 1e-3f}) {
      // Odd offsets and lengths exercise the vector tails.
      for (int64_t begin : {0, 3}) {
        const int64_t count = int64_t(x.size()) - begin - 5;
        std::vector<uint8_t> codes(size_t(count) + 1, 0xAB);
        variant.linear.quantize_e4m3_f32(x.data() + begin, count, scale, codes.data());
        for (int64_t i = 0; i < count; ++i)
          ASSERT_EQ(codes[i], quantize_e4m3_saturating(x[begin + i] / scale))
              << variant.name << " x=" << x[begin + i] << " scale=" << scale;
        EXPECT_EQ(codes[size_t(count)], 0xAB) << variant.name << " wrote past the end";
      }
    }
  }
}

// Quotients x / s within a few float32 ulps of every E4M3 value and of every
// rounding midpoint, for scales that are not powers of two and scales whose
// reciprocal is not a normal float: where a shortcut for the division (a
// multiplication by 1/s, even one guarded at the midpoints with too small a
// margin) rounds differently. Pins every variant to the division of docs/step-policy.md §12.
TEST(QuantizeVariants, QuotientsNextToMidpointsAreBitExact) {
  for (const KernelSet& variant : kernel_variants()) {
    if (!variant.linear.supported()) continue;
    for (float scale : test::e4m3_awkward_scales()) {
      const std::vector<float> x = test::quotients_next_to_e4m3_midpoints(scale);
      std::vector<uint8_t> codes(x.size());
      variant.linear.quantize_e4m3_f32(x.data(), int64_t(x.size()), scale, codes.data());
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(codes[i], quantize_e4m3_saturating(x[i] / scale))
            << variant.name << " x=" << x[i] << " scale=" << scale << " x/scale=" << x[i] / scale;
    }
  }
}

TEST(QuantizeVariants, Bf16ActivationCodesAreBitExact) {
  std::vector<uint16_t> x;
  for (uint32_t h = 0; h < 0x10000; ++h) x.push_back(uint16_t(h));  // every bf16, NaNs and infinities included
  for (const KernelSet& variant : kernel_variants()) {
    if (!variant.linear.supported()) continue;
    for (float scale : {1.0f, 0.0217f, 7.5f}) {
      std::vector<uint8_t> codes(x.size() - 1);
      variant.linear.quantize_e4m3_bf16(x.data() + 1, int64_t(codes.size()), scale, codes.data());
      for (size_t i = 0; i < codes.size(); ++i)
        ASSERT_EQ(codes[i], quantize_e4m3_saturating(bf16_to_float(x[i + 1]) / scale))
            << variant.name << " bf16=0x" << std::hex << x[i + 1];
    }
  }
}

TEST(QuantizeVariants, WeightDequantizationIsBitExact) {
  std::vector<uint8_t> codes;
  for (int rep = 0; rep < 3; ++rep)
    for (int c = 0; c < 256; ++c) codes.push_back(uint8_t(c));
  for (const KernelSet& variant : kernel_variants()) {
    if (!variant.linear.supported()) continue;
    for (float scale : {1.0f, 0.0123f, 2.5e-4f, 1.7e-38f}) {
      const int64_t count = int64_t(codes.size()) - 7;
      std::vector<uint16_t> out(static_cast<size_t>(count));
      variant.linear.dequantize_e4m3_to_bf16(codes.data(), count, scale, out.data());
      for (int64_t i = 0; i < count; ++i) {
        const uint16_t want = float_to_bf16_rne(e4m3_to_float(codes[i]) * scale);
        if (std::isnan(bf16_to_float(want))) {
          EXPECT_TRUE(std::isnan(bf16_to_float(out[i]))) << variant.name << " code " << int(codes[i]);
        } else {
          ASSERT_EQ(out[i], want) << variant.name << " code 0x" << std::hex << int(codes[i]) << " scale " << scale;
        }
      }
    }
  }
}

TEST(KernelTable, RefIsFirstAndNamesResolve) {
  ASSERT_FALSE(kernel_variants().empty());
  EXPECT_STREQ(kernel_variants()[0].name, "ref");
  EXPECT_STREQ(kernel_variant("ref").name, "ref");
  EXPECT_THROW(kernel_variant("sse1"), std::exception);
  for (const KernelSet& v : kernel_variants()) {
    if (v.supported()) {
      EXPECT_STREQ(kernel_variant(v.name).name, v.name);
    } else {
      EXPECT_THROW(kernel_variant(v.name), std::exception) << v.name;
    }
  }
  EXPECT_TRUE(active_kernels().linear.supported());
}

}  // namespace
}  // namespace stepmix::kernels
