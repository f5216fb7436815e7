// The denoising loop's CUDA pieces against the CPU code they replace (like
// every GPU test, also run on the CPU's SIMT emulator by test_cuda_on_cpu): the
// FlowMatch Euler scheduler's fp32 step (the real scheduler, several steps),
// UniPC's step (whole runs at orders 1 and 2 against the real scheduler's
// step()), the CFG combination of the denoising loop, patchify/unpatchify and
// the timestep sinusoid of model/embedding.hpp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/non_finite.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "model/embedding.hpp"
#include "sched/flow_match_euler.hpp"
#include "sched/unipc.hpp"

namespace stepmix::test {
namespace {

class CudaDenoiseLoop : public CudaTest {};

TEST_F(CudaDenoiseLoop, CfgAndEulerStepsAreThoseOfTheCpuLoopBitForBit) {
  const size_t n = 50021;
  std::vector<float> latent = normal_floats(n, 81, 1.0f);
  sched::FlowMatchEulerDiscreteScheduler scheduler(sched::FlowMatchEulerOptions{1000, 3.0});
  scheduler.set_timesteps(6);
  cuda::DeviceBuffer d_latent = to_device(latent), d_uncond(n * 4), d_cond(n * 4), d_guided(n * 4);
  const float guidance = 4.5f;
  for (int step = 0; step < scheduler.num_steps(); ++step) {
    const std::vector<float> v_uncond = normal_floats(n, 90 + step, 1.0f);
    const std::vector<float> v_cond = normal_floats(n, 190 + step, 1.0f);
    // The CPU loop (pipeline/denoise.cpp), then the scheduler.
    std::vector<float> guided(n);
    for (size_t k = 0; k < n; ++k) guided[k] = v_uncond[k] + guidance * (v_cond[k] - v_uncond[k]);
    const float dt = scheduler.sigmas()[size_t(step) + 1] - scheduler.sigmas()[size_t(step)];
    scheduler.step(guided.data(), scheduler.timesteps()[size_t(step)], latent.data(), n);

    d_uncond.upload(v_uncond.data(), n * 4);
    d_cond.upload(v_cond.data(), n * 4);
    cuda::cfg_combine(d_uncond.as<float>(), d_cond.as<float>(), int64_t(n), guidance, d_guided.as<float>(), nullptr);
    expect_same_floats(to_host<float>(d_guided, n), guided, "cfg");
    cuda::euler_step(d_latent.as<float>(), d_guided.as<float>(), int64_t(n), dt, nullptr);
    expect_same_floats(to_host<float>(d_latent, n), latent, "euler");
  }
}

// Every step of a run: the scheduler's own step() on the host, the same step
// as begin_latent_step's coefficients through unipc_step_f32 on the device
// (history in device memory, renamed by LatentHistory::advance), bit for bit.
TEST_F(CudaDenoiseLoop, UniPCStepsAreThoseOfTheSchedulerBitForBit) {
  const size_t n = 50021;
  for (int order : {1, 2}) {
    for (int steps : {3, 35}) {
      sched::UniPCOptions o;
      o.flow_shift = 10.0;
      o.solver_order = order;
      sched::UniPCMultistepScheduler host(o), device(o);
      host.set_timesteps(steps);
      device.set_timesteps(steps);
      std::vector<float> latent = normal_floats(n, 83, 1.0f);
      cuda::DeviceBuffer d_latent = to_device(latent), d_v(n * 4), d_history(4 * n * 4);
      float* h = d_history.as<float>();
      sched::LatentHistory history{h, h + n, h + 2 * n, h + 3 * n};
      for (int k = 0; k < steps; ++k) {
        const double t = host.timesteps()[size_t(k)];
        const std::vector<float> v = normal_floats(n, 300 + k, 1.0f);
        host.step(v.data(), t, latent.data(), n);
        const sched::LatentStep step = device.begin_latent_step(t, n);
        d_v.upload(v.data(), n * 4);
        cuda::unipc_step_f32(step.unipc, int64_t(n), d_latent.as<float>(), d_v.as<float>(), history.x0_prev2,
                             history.x0_prev, history.x0_now, history.last_sample, nullptr);
        history.advance();
        SCOPED_TRACE("order " + std::to_string(order) + " step " + std::to_string(k) + " of " + std::to_string(steps));
        expect_same_floats(to_host<float>(d_latent, n), latent, "unipc");
      }
    }
  }
}

TEST_F(CudaDenoiseLoop, TheNonFiniteFlagAgreesWithTheCpuScan) {
  const size_t n = 70001;
  cuda::DeviceBuffer flag(4);
  for (uint32_t bits : {0u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x7F7FFFFFu}) {
    for (size_t where : {size_t(0), n / 2, n - 1}) {
      std::vector<float> x = normal_floats(n, 97, 1e30f);
      x[where] = std::bit_cast<float>(bits);
      cuda::DeviceBuffer d = to_device(x);
      cuda::fill_zero(flag.data(), 4, nullptr);
      cuda::flag_non_finite_f32(d.as<float>(), int64_t(n), flag.as<uint32_t>(), nullptr);
      const bool flagged = to_host<uint32_t>(flag, 1)[0] != 0;
      EXPECT_EQ(flagged, first_non_finite(x.data(), n).has_value()) << std::hex << bits << " at " << where;
    }
  }
}

TEST_F(CudaDenoiseLoop, PatchifyAndUnpatchifyAreTheCpuIndexMaps) {
  for (const PatchGrid grid : {PatchGrid{16, 3, 10, 14, 2}, PatchGrid{4, 2, 7, 5, 2}, PatchGrid{3, 1, 4, 4, 1}}) {
    const int64_t numel = grid.channels * grid.frames * grid.height * grid.width;
    const std::vector<float> latent = normal_floats(size_t(numel), 95, 1.0f);
    const std::vector<float> patches = patchify(latent.data(), grid);
    cuda::DeviceBuffer d_latent = to_device(latent), d_patches = poisoned<float>(patches.size());
    cuda::patchify(d_latent.as<float>(), grid, d_patches.as<float>(), nullptr);
    expect_same_floats(to_host<float>(d_patches, patches.size()), patches, "patchify");

    std::vector<int64_t> noisy;
    for (int64_t t = grid.frames - 1; t >= 0; t -= 2) noisy.push_back(t);  // not in order, some frames left out
    const int64_t per_frame = grid.tokens_per_frame() * grid.features();
    const std::vector<float> noisy_patches(patches.begin(), patches.begin() + int64_t(noisy.size()) * per_frame);
    const std::vector<float> want = unpatchify(noisy_patches.data(), grid, noisy);
    cuda::DeviceBuffer d_noisy = to_device(noisy_patches), d_out = poisoned<float>(size_t(numel));
    cuda::unpatchify(d_noisy.as<float>(), grid, noisy.data(), int64_t(noisy.size()), d_out.as<float>(), nullptr);
    expect_same_floats(to_host<float>(d_out, size_t(numel)), want, "unpatchify");
  }
}

TEST_F(CudaDenoiseLoop, TimestepSinusoidWithinOneFloatUlpOfTheCpu) {
  for (float t : {999.0f, 937.5f, 500.0f, 13.0f, 0.0f}) {
    for (double scale : {1.0, 0.001}) {
      const std::vector<float> want = timestep_sinusoid({t}, scale);
      cuda::DeviceBuffer out = poisoned<float>(size_t(kTimestepChannels));
      cuda::timestep_sinusoid(t, float(scale), out.as<float>(), nullptr);
      const auto got = to_host<float>(out, size_t(kTimestepChannels));
      int exact = 0;
      for (size_t j = 0; j < got.size(); ++j) {
        const float ulp = std::nextafter(std::fabs(want[j]), 2.0f) - std::fabs(want[j]);
        ASSERT_LE(std::fabs(got[j] - want[j]), ulp) << "t=" << t << " j=" << j;
        exact += float_bits(got[j]) == float_bits(want[j]);
      }
      EXPECT_GE(exact, int(got.size()) - 8) << "t=" << t;
    }
  }
}

}  // namespace
}  // namespace stepmix::test
