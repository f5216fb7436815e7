// Sigma/timestep grids: exact timesteps and bit-exact float32 sigmas against
// unipc_schedules.safetensors and the tables of docs/schedulers.md.
#include "sched/fp_contract.hpp"  // expected values are computed with the reference roundings

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sched/config.hpp"
#include "sched/schedule.hpp"
#include "sched_test_util.hpp"
#include "stepmix/error.hpp"

namespace stepmix::sched {
namespace {

struct GoldenGrid {
  std::string config;  // key prefix in unipc_schedules.safetensors
  std::string file;    // scheduler config it was made with
};

class UniPCGoldenSchedules : public ::testing::TestWithParam<GoldenGrid> {};

// Every config × N in the file, through the same path the CLI takes
// (config file → make_scheduler → set_timesteps).
TEST_P(UniPCGoldenSchedules, TimestepsExactSigmasBitExact) {
  auto f = test::open_golden("scheduler/unipc_schedules.safetensors");
  const SchedulerConfig cfg = load_scheduler_config(stepmix::test::golden_path("scheduler/" + GetParam().file));
  auto sched = make_scheduler(cfg);
  for (int n : {1, 2, 4, 8, 35, 50}) {
    const std::string key = GetParam().config + ".n" + std::to_string(n);
    const auto want_t = test::i64(*f, key + ".timesteps");
    const auto want_s = test::f32(*f, key + ".sigmas");
    sched->set_timesteps(n);
    auto* unipc = dynamic_cast<UniPCMultistepScheduler*>(sched.get());
    ASSERT_NE(unipc, nullptr);
    EXPECT_EQ(unipc->integer_timesteps(), want_t) << key;
    ASSERT_EQ(sched->timesteps().size(), want_t.size());
    for (std::size_t i = 0; i < want_t.size(); ++i) EXPECT_EQ(sched->timesteps()[i], double(want_t[i])) << key;
    EXPECT_TRUE(test::same_bits(sched->sigmas(), want_s)) << key;
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, UniPCGoldenSchedules,
                         ::testing::Values(GoldenGrid{"flowshift3", "unipc_flowshift3.json"},
                                           GoldenGrid{"flowshift10", "unipc_flowshift10.json"},
                                           GoldenGrid{"checkpoint_default", "unipc_checkpoint_default.json"}),
                         [](const auto& info) { return info.param.config; });

void expect_grid(const UniPCSchedule& s, const std::vector<std::int64_t>& t, const std::vector<double>& sigmas) {
  EXPECT_EQ(s.timesteps, t);
  ASSERT_EQ(s.sigmas.size(), sigmas.size());
  for (std::size_t i = 0; i < sigmas.size(); ++i) EXPECT_NEAR(s.sigmas[i], sigmas[i], 6e-9) << "k=" << i;
}

TEST(UniPCSchedule, SpecTable) {  // docs/schedulers.md §2.3
  expect_grid(unipc_flow_schedule(4, 1000, 10), {999, 967, 909, 769},
              {0.99999899, 0.96778357, 0.90925604, 0.76993936, 0});
  expect_grid(unipc_flow_schedule(4, 1000, 1), {999, 750, 500, 250},
              {0.99999899, 0.75024998, 0.50050002, 0.25075001, 0});
  expect_grid(unipc_flow_schedule(4, 1000, 3), {999, 900, 750, 500},
              {0.99999899, 0.90011996, 0.75037479, 0.50099897, 0});
  expect_grid(unipc_flow_schedule(1, 1000, 10), {999}, {0.99999899, 0});
  expect_grid(unipc_flow_schedule(10, 1000, 10), {999, 989, 975, 958, 937, 909, 869, 811, 715, 528},
              {0.99999899, 0.98902309, 0.97563952, 0.95896041, 0.93759757, 0.90925604, 0.86984843, 0.81132126,
               0.71530348, 0.52879828, 0});
  const std::vector<std::int64_t> n35{999, 997, 993, 990, 987, 983, 979, 975, 971, 966, 961, 956,
                                      950, 944, 937, 930, 922, 913, 904, 894, 882, 869, 855, 839,
                                      821, 800, 776, 748, 715, 675, 626, 565, 486, 381, 233};
  EXPECT_EQ(unipc_flow_schedule(35, 1000, 10).timesteps, n35);
  const std::vector<std::int64_t> n50s3{
      999, 993, 986, 979, 971, 964, 956, 948, 940, 931, 923, 914, 904, 895, 885, 875, 864,
      853, 842, 830, 818, 805, 792, 779, 765, 750, 735, 719, 702, 685, 667, 648, 628, 607,
      586, 563, 539, 514, 487, 459, 429, 398, 365, 329, 292, 251, 208, 162, 113, 60};
  EXPECT_EQ(unipc_flow_schedule(50, 1000, 3).timesteps, n50s3);
}

// The pipeline's use_native_flow_schedule (docs/schedulers.md §2.2): the grid
// starts at 1 − 1/T, so there is no nudge; timesteps truncate as before.
TEST(UniPCSchedule, NativeFlowGrid) {
  expect_grid(unipc_flow_schedule(4, 1000, 10, /*native_grid=*/true), {999, 967, 908, 768},
              {0.99989992, 0.96761698, 0.90892547, 0.76899391, 0});
  const UniPCSchedule one = unipc_flow_schedule(1, 1000, 1, true);
  EXPECT_EQ(one.timesteps, (std::vector<std::int64_t>{999}));
  EXPECT_EQ(one.sigmas[0], 0.999f);
}

TEST(UniPCSchedule, RejectsNonPositiveSteps) {
  EXPECT_THROW(unipc_flow_schedule(0, 1000, 10), Error);
  EXPECT_THROW(unipc_flow_schedule(-1, 1000, 10), Error);
  EXPECT_THROW(unipc_karras_flow_schedule(0, 1000, 0.147, 200), Error);
  EXPECT_THROW(unipc_karras_flow_schedule(4, 1000, 200, 0.147), Error);
}

TEST(FlowMatchSchedule, DefaultGridSpecExample) {  // docs/schedulers.md §9, s = 3, N = 4
  const FlowMatchSchedule s = flow_match_default_schedule(4, 1000, 3.0);
  const std::vector<double> sigmas{1.0, 0.8576923, 0.6021506, 0.0089286, 0};
  const std::vector<double> t{1000, 857.6923, 602.1506, 8.9286};
  for (std::size_t i = 0; i < sigmas.size(); ++i) EXPECT_NEAR(s.sigmas[i], sigmas[i], 1e-7);
  for (std::size_t i = 0; i < t.size(); ++i) EXPECT_NEAR(s.timesteps[i], t[i], 1e-4);
}

TEST(FlowMatchSchedule, DefaultGridBitExactAgainstGoldenTrajectories) {
  for (int n : {4, 8}) {
    auto f = test::open_golden("scheduler/flowmatch_euler_shift3_n" + std::to_string(n) + "_trajectory.safetensors");
    const FlowMatchSchedule s = flow_match_default_schedule(n, 1000, 3.0);
    EXPECT_TRUE(test::same_bits(s.sigmas, test::f32(*f, "sigmas"))) << n;
    EXPECT_TRUE(test::same_bits(s.timesteps, test::f32(*f, "timesteps"))) << n;
  }
}

TEST(FlowMatchSchedule, ExplicitDistilledList) {  // docs/schedulers.md §9
  const std::vector<double> t_list{1.0, 0.9375, 0.8333333333333334, 0.625};
  const FlowMatchSchedule s = flow_match_explicit_schedule(t_list, 1000, 1.0);
  EXPECT_EQ(s.timesteps, (std::vector<float>{1000.0f, 937.5f, 833.3333f, 625.0f}));
  EXPECT_EQ(s.sigmas, (std::vector<float>{1.0f, 0.9375f, float(0.8333333333333334), 0.625f, 0.0f}));
  // The four values are [1, 0.75, 0.5, 0.25] after a shift of 5.
  const FlowMatchSchedule shifted = flow_match_explicit_schedule({1.0, 0.75, 0.5, 0.25}, 1000, 5.0);
  for (std::size_t i = 0; i < t_list.size(); ++i) EXPECT_NEAR(shifted.sigmas[i], t_list[i], 1e-7);
  EXPECT_THROW(flow_match_explicit_schedule({}, 1000, 1.0), Error);
  EXPECT_THROW(flow_match_explicit_schedule({1.0, 1.2}, 1000, 1.0), Error);
  EXPECT_THROW(flow_match_explicit_schedule({0.5, 0.75}, 1000, 1.0), Error);
  EXPECT_THROW(flow_match_default_schedule(0, 1000, 3.0), Error);
}

}  // namespace
}  // namespace stepmix::sched
