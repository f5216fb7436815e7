// Shared by the CUDA backend tests: a fixture that skips, with the reason,
// when this machine has no usable GPU (CI builds these tests without one),
// and helpers to move vectors to and from the device.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/numerics.hpp"
#include "kernels/cuda/cuda_device.hpp"
#include "vae/frame.hpp"

namespace stepmix::test {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why_not;
    if (!cuda::cuda_available(&why_not)) GTEST_SKIP() << "no usable CUDA GPU: " << why_not;
  }
};

template <class T>
cuda::DeviceBuffer to_device(const std::vector<T>& values) {
  return cuda::DeviceBuffer::from_host(values);
}

template <class T>
std::vector<T> to_host(const cuda::DeviceBuffer& buffer, std::size_t count) {
  cuda::synchronize(nullptr);
  return buffer.to_host<T>(count);
}

// A device buffer of `count` elements filled with 0xA5 bytes, so an element
// the kernel forgot to write shows up.
template <class T>
cuda::DeviceBuffer poisoned(std::size_t count) {
  return cuda::DeviceBuffer::from_host(std::vector<uint8_t>(count * sizeof(T), 0xA5));
}

inline std::vector<float> normal_floats(std::size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

inline std::vector<uint16_t> normal_bf16(std::size_t n, uint32_t seed, float scale) {
  std::vector<uint16_t> v;
  for (float x : normal_floats(n, seed, scale)) v.push_back(float_to_bf16_rne(x));
  return v;
}

// Distance in bf16 steps between two finite bf16 values of the same sign
// (or zero); large for anything else.
inline int bf16_ulps(uint16_t a, uint16_t b) {
  if (a == b) return 0;
  if ((a ^ b) & 0x8000u) return (a & 0x7FFFu) == 0 && (b & 0x7FFFu) == 0 ? 0 : 1 << 20;
  return std::abs(int(a & 0x7FFFu) - int(b & 0x7FFFu));
}

// Counts of exact and 1-ulp matches between two bf16 results, and the worst.
struct Bf16Agreement {
  std::size_t exact = 0, total = 0;
  int worst_ulps = 0;
  double exact_fraction() const { return total ? double(exact) / double(total) : 1.0; }
};

inline Bf16Agreement compare_bf16(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  Bf16Agreement r;
  r.total = a.size();
  for (std::size_t i = 0; i < a.size(); ++i) {
    const int d = bf16_ulps(a[i], b[i]);
    r.exact += d == 0;
    r.worst_ulps = std::max(r.worst_ulps, d);
  }
  return r;
}

inline ::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

inline uint32_t float_bits(float f) { return std::bit_cast<uint32_t>(f); }

// Every float identical, bit for bit; `what` names the comparison.
inline void expect_same_floats(const std::vector<float>& got, const std::vector<float>& want,
                               const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(float_bits(got[i]), float_bits(want[i])) << what << " " << i;
}

// A VAE frame [h][w][c] of seeded normal values times `scale`, float32 or
// bf16 (rounded to nearest even).
inline vae::Frame random_frame(int64_t h, int64_t w, int64_t c, uint32_t seed,
                               kernels::FrameElement type = kernels::FrameElement::F32, float scale = 1.0f) {
  vae::Frame f = vae::Frame::zeros(h, w, c, type);
  const std::vector<float> values = normal_floats(std::size_t(h * w * c), seed, scale);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (type == kernels::FrameElement::F32) {
      f.f32[i] = values[i];
    } else {
      f.bf16[i] = float_to_bf16_rne(values[i]);
    }
  }
  return f;
}

}  // namespace stepmix::test
