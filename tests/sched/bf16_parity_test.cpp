// BF16 emulation parity: the whole trajectory must equal, bit for bit, the
// reference scheduler code run in torch with BF16 sample and model output
// (the Diffusers pipeline's dtype). The expected values are an FNV-1a hash
// of every step's BF16 bits, recorded from that run (README model, golden
// noise rounded to BF16, v rounded float64 -> float32 -> BF16).
#include "sched/fp_contract.hpp"  // expected values are computed with the reference roundings

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "core/numerics.hpp"
#include "sched/flow_match_euler.hpp"
#include "sched/unipc.hpp"
#include "sched_test_util.hpp"

namespace stepmix::sched {
namespace {

std::uint64_t fnv1a_bf16(const std::vector<float>& values) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (float f : values) {
    const std::uint16_t bits = float_to_bf16_rne(f);
    for (std::uint8_t byte : {std::uint8_t(bits & 0xff), std::uint8_t(bits >> 8)}) {
      h ^= byte;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

float to_bf16(float f) { return bf16_to_float(float_to_bf16_rne(f)); }

// Runs the README loop in BF16 emulation; returns every step's sample.
std::vector<float> bf16_run(Scheduler& s, const std::vector<float>& noise, int n) {
  s.set_timesteps(n);
  std::vector<float> x = noise, v, all;
  for (float& e : x) e = to_bf16(e);
  for (int i = 0; i < n; ++i) {
    test::readme_model(x, s.timesteps()[std::size_t(i)], v);
    for (float& e : v) e = to_bf16(e);
    s.step(v, s.timesteps()[std::size_t(i)], x);
    for (float e : x) EXPECT_EQ(e, to_bf16(e));
    all.insert(all.end(), x.begin(), x.end());
  }
  return all;
}

TEST(Bf16Parity, UniPCShift10N8) {
  auto f = test::open_golden("scheduler/unipc_flowshift10_n8_trajectory.safetensors");
  UniPCOptions o;
  o.flow_shift = 10.0;
  o.precision = Precision::bf16_emulation;
  UniPCMultistepScheduler s(o);
  const auto all = bf16_run(s, test::f32(*f, "noise"), 8);
  const std::size_t last = all.size() - all.size() / 8;
  EXPECT_EQ(all[last], 0.3671875f);
  EXPECT_EQ(all[last + 1], -0.4375f);
  EXPECT_EQ(fnv1a_bf16(all), 0xfe4f851deaf1c2e6ull);
}

TEST(Bf16Parity, FlowMatchShift3N8) {
  auto f = test::open_golden("scheduler/flowmatch_euler_shift3_n8_trajectory.safetensors");
  FlowMatchEulerOptions o;
  o.shift = 3.0;
  o.precision = Precision::bf16_emulation;
  FlowMatchEulerDiscreteScheduler s(o);
  const auto all = bf16_run(s, test::f32(*f, "noise"), 8);
  const std::size_t last = all.size() - all.size() / 8;
  EXPECT_EQ(all[last], 0.2265625f);
  EXPECT_EQ(fnv1a_bf16(all), 0x8970770ebef38e16ull);

  // Stochastic step with constant noise 0.5 (noise stays FP32).
  o.stochastic_sampling = true;
  FlowMatchEulerDiscreteScheduler sde(o);
  sde.set_noise_source([](int, std::span<float> out) {
    for (float& e : out) e = 0.5f;
  });
  EXPECT_EQ(fnv1a_bf16(bf16_run(sde, test::f32(*f, "noise"), 8)), 0x60e4b8edd487fc9eull);
}

}  // namespace
}  // namespace stepmix::sched
