// CUDA pointwise kernels against their CPU twins (the portable kernels of
// kernels/ref/pointwise_ref.cpp; like every GPU test, also run on the CPU's
// SIMT emulator by test_cuda_on_cpu). Exactness as cuda_kernels.hpp states it:
// residual add, relu², widen and round bit for bit (NaN and infinities
// included); RMSNorm and the per-head norm sum squares in float64 in another
// order, so a row's float32 mean may differ in its last bit: every output
// within one bf16 step and at least 99.9% identical; SiLU's exp is float64
// rounded to float32 against glibc's expf, same allowance in bf16 (two
// float32 ulps in float32, below). The norm inputs
// span 2^-20..2^20 so that float32 sums could not be mistaken for float64.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "cuda_test_util.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/kernel_set.hpp"
#include "stepmix/error.hpp"

namespace stepmix::test {
namespace {

class CudaPointwise : public CudaTest {};

const kernels::PointwiseFamily& cpu() { return kernels::reference_kernels().pointwise; }

// Values over many octaves, both signs.
std::vector<float> wide_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> exponent(-20.0f, 20.0f);
  std::uniform_int_distribution<int> sign(0, 1);
  std::vector<float> v(n);
  for (float& x : v) x = (sign(rng) ? -1.0f : 1.0f) * std::exp2(exponent(rng));
  return v;
}

void expect_close_to_twin(const std::vector<uint16_t>& gpu, const std::vector<uint16_t>& twin, const char* what) {
  const Bf16Agreement a = compare_bf16(gpu, twin);
  EXPECT_LE(a.worst_ulps, 1) << what;
  EXPECT_GE(a.exact_fraction(), 0.999) << what;
}

TEST_F(CudaPointwise, RmsNormMatchesTheCpuTwin) {
  for (NormKind kind : {NormKind::Standard, NormKind::Nemotron}) {
    for (const auto& [rows, n] : {std::pair<int64_t, int64_t>{67, 4096}, {5, 1000}, {300, 64}}) {
      std::vector<float> x = normal_floats(size_t(rows * n), 31, 3.0f);
      const std::vector<float> spread = wide_floats(size_t(rows), 32);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < n; ++i) x[size_t(r * n + i)] *= std::fabs(spread[size_t(r)]);
      const std::vector<float> w = normal_floats(size_t(n), 33, 1.0f);
      std::vector<uint16_t> twin(x.size());
      cpu().rms_norm_bf16(x.data(), rows, n, w.data(), 1e-6f, kind, twin.data());
      cuda::DeviceBuffer dx = to_device(x), dw = to_device(w), out = poisoned<uint16_t>(x.size());
      cuda::rms_norm_to_bf16(dx.as<float>(), rows, n, dw.as<float>(), 1e-6f, kind, out.as<uint16_t>(), nullptr);
      expect_close_to_twin(to_host<uint16_t>(out, x.size()), twin,
                           kind == NormKind::Standard ? "standard" : "nemotron");
    }
  }
}

TEST_F(CudaPointwise, HeadNormRotaryMatchesTheCpuTwin) {
  for (int64_t D : {int64_t(16), int64_t(64), int64_t(128), int64_t(256)}) {
    for (bool with_norm : {true, false}) {
      const int64_t rows = 37, heads = 8;
      const std::vector<uint16_t> x = normal_bf16(size_t(rows * heads * D), 41, 2.0f);
      const std::vector<float> w = normal_floats(size_t(D), 42, 1.0f);
      // cos/sin of real angles (the rotary tables' values), one row per token.
      std::vector<float> cos(size_t(rows * D)), sin(size_t(rows * D));
      for (size_t i = 0; i < cos.size(); ++i) {
        const float angle = float(i % 977) * 0.37f;
        cos[i] = std::cos(angle), sin[i] = std::sin(angle);
      }
      for (NormKind kind : {NormKind::Standard, NormKind::Nemotron}) {
        std::vector<uint16_t> twin = x;
        cpu().head_norm_rotary_bf16(twin.data(), rows, heads, D, with_norm ? w.data() : nullptr, 1e-6f, kind,
                                    cos.data(), sin.data());
        cuda::DeviceBuffer dx = to_device(x), dw = to_device(w), dc = to_device(cos), ds = to_device(sin);
        cuda::head_norm_rotary_bf16(dx.as<uint16_t>(), rows, heads, D, with_norm ? dw.as<float>() : nullptr, 1e-6f,
                                    kind, dc.as<float>(), ds.as<float>(), nullptr);
        const auto gpu = to_host<uint16_t>(dx, x.size());
        if (with_norm)
          expect_close_to_twin(gpu, twin, "head norm + rotary");
        else
          EXPECT_EQ(gpu, twin) << "rotary alone is exact, D=" << D;
      }
    }
  }
}

TEST_F(CudaPointwise, SiluGateMatchesTheCpuTwin) {
  const size_t n = 200003;
  std::vector<uint16_t> gate = normal_bf16(n, 51, 4.0f), up = normal_bf16(n, 52, 2.0f);
  for (float special : {0.0f, -0.0f, 100.0f, -100.0f, 1e30f, -1e30f}) gate.push_back(float_to_bf16_rne(special));
  up.resize(gate.size(), float_to_bf16_rne(1.5f));
  std::vector<uint16_t> twin(gate.size());
  cpu().silu_gate_bf16(gate.data(), up.data(), int64_t(gate.size()), twin.data());
  cuda::DeviceBuffer dg = to_device(gate), du = to_device(up), out = poisoned<uint16_t>(gate.size());
  cuda::silu_gate_bf16(dg.as<uint16_t>(), du.as<uint16_t>(), int64_t(gate.size()), out.as<uint16_t>(), nullptr);
  expect_close_to_twin(to_host<uint16_t>(out, gate.size()), twin, "silu gate");
  // In place over gate, and through the scalar path (odd offset).
  cuda::silu_gate_bf16(dg.as<uint16_t>() + 1, du.as<uint16_t>() + 1, int64_t(gate.size()) - 1, dg.as<uint16_t>() + 1,
                       nullptr);
  auto in_place = to_host<uint16_t>(dg, gate.size());
  in_place.erase(in_place.begin());
  expect_close_to_twin(in_place, std::vector<uint16_t>(twin.begin() + 1, twin.end()), "silu gate in place");
}

// The timestep MLP's float32 SiLU against kernels::ref::silu: the same
// division and addition; exp is float64 exp rounded once, which is glibc's
// expf except where glibc's (not correctly rounded, < 0.502 ulp) result is
// the other float: 74 of these 101,009 inputs, measured on the CPU. The one
// ulp of exp survives 1 + e and the division can round it to two, at 5 of
// them, so: within two float32 ulps and at least 99.9% identical (99.955%).
TEST_F(CudaPointwise, SiluF32MatchesTheCpuTwin) {
  std::vector<float> x = normal_floats(100003, 53, 4.0f);
  for (float v : wide_floats(1000, 54)) x.push_back(v);
  for (float special : {0.0f, -0.0f, 88.0f, -88.0f, 1e30f, -1e30f}) x.push_back(special);
  std::vector<float> twin = x;
  kernels::ref::silu(twin.data(), int64_t(twin.size()));
  cuda::DeviceBuffer dx = to_device(x);
  cuda::silu_f32(dx.as<float>(), int64_t(x.size()), nullptr);
  const std::vector<float> got = to_host<float>(dx, x.size());
  std::size_t exact = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const int64_t ulps = std::abs(int64_t(float_bits(got[i])) - int64_t(float_bits(twin[i])));
    ASSERT_LE(ulps, 2) << "x = " << x[i] << ": " << got[i] << " vs " << twin[i];
    exact += ulps == 0;
  }
  EXPECT_GE(double(exact) / double(x.size()), 0.999);
}

std::vector<uint16_t> every_bf16() {
  std::vector<uint16_t> x;
  for (uint32_t h = 0; h < 0x10000; ++h) x.push_back(uint16_t(h));
  return x;
}

TEST_F(CudaPointwise, ReluSquaredWidenAndResidualAddAreBitExactOnEveryBf16) {
  const std::vector<uint16_t> x = every_bf16();
  const int64_t n = int64_t(x.size());
  {
    std::vector<uint16_t> twin = x;
    cpu().relu_squared_bf16(twin.data(), n);
    cuda::DeviceBuffer d = to_device(x);
    cuda::relu_squared_bf16(d.as<uint16_t>(), n, nullptr);
    EXPECT_EQ(to_host<uint16_t>(d, x.size()), twin);
  }
  {
    std::vector<float> twin(x.size());
    cpu().widen_bf16(x.data(), n, twin.data());
    cuda::DeviceBuffer d = to_device(x), out = poisoned<float>(x.size());
    cuda::widen_bf16(d.as<uint16_t>(), n, out.as<float>(), nullptr);
    const auto got = to_host<float>(out, x.size());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(float_bits(got[i]), float_bits(twin[i])) << i;
  }
  {
    std::vector<float> residual = normal_floats(x.size(), 61, 100.0f);
    std::vector<float> twin = residual;
    cpu().add_bf16(twin.data(), x.data(), n);
    cuda::DeviceBuffer dr = to_device(residual), dy = to_device(x);
    cuda::add_bf16_to_f32(dr.as<float>(), dy.as<uint16_t>(), n, nullptr);
    const auto got = to_host<float>(dr, x.size());
    for (size_t i = 0; i < x.size(); ++i)
      if (!std::isnan(twin[i])) ASSERT_EQ(float_bits(got[i]), float_bits(twin[i])) << i;
  }
}

TEST_F(CudaPointwise, AddRowIsTheCpuAddOnEveryRowBitForBit) {
  const int64_t rows = 37, n = 1001;  // n not a multiple of 8: rows start unaligned
  const std::vector<float> x = wide_floats(size_t(rows * n), 73), row = wide_floats(size_t(n), 74);
  std::vector<float> twin = x;
  for (int64_t r = 0; r < rows; ++r) cpu().add_f32(twin.data() + r * n, row.data(), n);
  cuda::DeviceBuffer dx = to_device(x), drow = to_device(row);
  cuda::add_row_f32(dx.as<float>(), rows, n, drow.as<float>(), nullptr);
  const auto got = to_host<float>(dx, x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(float_bits(got[i]), float_bits(twin[i])) << i;
}

TEST_F(CudaPointwise, RoundToBf16IsBitExactIncludingTiesAndNaN) {
  std::vector<float> x = wide_floats(100000, 71);
  for (uint32_t bits : {0x3F808000u, 0x3F818000u, 0x7F7FFFFFu, 0x7F800000u, 0xFF800000u, 0x7FC00001u, 0xFFA00000u,
                        0x00000001u, 0x80008000u})
    x.push_back(std::bit_cast<float>(bits));
  std::vector<uint16_t> twin(x.size());
  cpu().round_bf16(x.data(), int64_t(x.size()), twin.data());
  for (int64_t offset : {0, 1}) {
    cuda::DeviceBuffer d = to_device(x), out = poisoned<uint16_t>(x.size());
    cuda::round_to_bf16(d.as<float>() + offset, int64_t(x.size()) - offset, out.as<uint16_t>() + offset, nullptr);
    const auto got = to_host<uint16_t>(out, x.size());
    for (size_t i = size_t(offset); i < x.size(); ++i)
      ASSERT_EQ(got[i], twin[i]) << "x bits 0x" << std::hex << float_bits(x[i]);
  }
}

// The launchers' argument checks (the GPU build's; the CPU emulation runs
// the kernels only). A null pointer is an error at the call, not an illegal
// address at the next synchronisation.
class CudaPointwiseArguments : public CudaTest {};

TEST_F(CudaPointwiseArguments, NullPointersAndEmptyRowsAreRefusedAtTheCall) {
  cuda::DeviceBuffer buffer = poisoned<float>(16);
  float* f = buffer.as<float>();
  uint16_t* h = reinterpret_cast<uint16_t*>(f);
  EXPECT_THROW(cuda::silu_gate_bf16(nullptr, h, 8, h, nullptr), Error);
  EXPECT_THROW(cuda::relu_squared_bf16(nullptr, 8, nullptr), Error);
  EXPECT_THROW(cuda::add_bf16_to_f32(f, nullptr, 8, nullptr), Error);
  EXPECT_THROW(cuda::widen_bf16(h, 8, nullptr, nullptr), Error);
  EXPECT_THROW(cuda::round_to_bf16(nullptr, 8, h, nullptr), Error);
  EXPECT_THROW(cuda::add_row_f32(f, 2, 0, f, nullptr), Error);
  cuda::round_to_bf16(nullptr, 0, nullptr, nullptr);  // nothing to do: no pointer needed
}

}  // namespace
}  // namespace stepmix::test
