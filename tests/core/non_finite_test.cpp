// first_non_finite: every floating dtype tested on its bits, the first index
// reported, blocks of the scan (4096 elements) crossed, integers ignored.
#include "core/non_finite.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/numerics.hpp"

namespace stepmix {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(NonFinite, FloatBuffersReportTheFirstIndex) {
  std::vector<float> v(10000, 1.0f);
  EXPECT_FALSE(first_non_finite(v.data(), v.size()));
  EXPECT_FALSE(first_non_finite(v.data(), 0));
  v[9000] = -kInf;  // second block
  v[7000] = kNaN;
  ASSERT_TRUE(first_non_finite(v.data(), v.size()));
  EXPECT_EQ(*first_non_finite(v.data(), v.size()), 7000u);
  EXPECT_FALSE(first_non_finite(v.data(), 7000));  // a prefix without it
  // Largest finite and denormals are finite.
  std::vector<float> edge{std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(), -0.0f};
  EXPECT_FALSE(first_non_finite(edge.data(), edge.size()));
  EXPECT_EQ(describe_non_finite(DType::F32, v.data(), 7000), "NaN");
  EXPECT_EQ(describe_non_finite(DType::F32, v.data(), 9000), "-inf");
}

TEST(NonFinite, E4M3HasOnlyTwoNanCodesAndNoInfinities) {
  // Every one of the 256 codes: only 0x7F and 0xFF are non-finite (0x7E =
  // 448 and 0x78 = 256 are ordinary numbers in E4M3FN).
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = uint8_t(c);
    EXPECT_EQ(first_non_finite(DType::F8_E4M3, &code, 1).has_value(), c == 0x7F || c == 0xFF) << c;
    EXPECT_EQ(std::isfinite(e4m3_to_float(code)), !(c == 0x7F || c == 0xFF)) << c;
  }
  std::vector<uint8_t> w(5000, 0x38);  // 1.0
  w[4500] = 0xFF;
  EXPECT_EQ(*first_non_finite(DType::F8_E4M3, w.data(), w.size()), 4500u);
  EXPECT_EQ(describe_non_finite(DType::F8_E4M3, w.data(), 4500), "NaN (code 0xff)");
}

TEST(NonFinite, SixteenBitAndE5M2CodesMatchTheirConversions) {
  // Exhaustive: the bit test agrees with isfinite of the reference conversion.
  for (uint32_t c = 0; c < 65536; ++c) {
    const uint16_t h = uint16_t(c);
    EXPECT_EQ(first_non_finite(DType::BF16, &h, 1).has_value(), !std::isfinite(bf16_to_float(h))) << c;
    EXPECT_EQ(first_non_finite(DType::F16, &h, 1).has_value(), !std::isfinite(f16_to_float(h))) << c;
  }
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = uint8_t(c);
    EXPECT_EQ(first_non_finite(DType::F8_E5M2, &code, 1).has_value(), !std::isfinite(e5m2_to_float(code))) << c;
  }
  const uint16_t inf_bf16 = 0x7F80;
  EXPECT_EQ(describe_non_finite(DType::BF16, &inf_bf16, 0), "+inf (code 0x7f80)");
}

TEST(NonFinite, IntegerTypesAreNeverNonFinite) {
  const std::vector<uint8_t> bytes(64, 0xFF);
  for (DType t : {DType::I64, DType::I32, DType::U8, DType::BOOL})
    EXPECT_FALSE(first_non_finite(t, bytes.data(), bytes.size() / dtype_size(t)));
}

TEST(NonFinite, UnalignedDataIsRead) {
  // Mapped tensors are aligned, but the scan must not rely on it.
  std::vector<unsigned char> raw(4 * 9 + 1, 0);
  const float bad = kInf;
  std::memcpy(raw.data() + 1 + 4 * 8, &bad, 4);
  EXPECT_EQ(*first_non_finite(DType::F32, raw.data() + 1, 9), 8u);
}

}  // namespace
}  // namespace stepmix
