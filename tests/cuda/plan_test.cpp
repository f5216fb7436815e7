// A Linear the GPU cannot run at a precision of the plan is refused by
// Model::plan, before any step: cuBLASLt's FP8 GEMM needs K % 16 == 0 and
// N % 8 == 0, which an FFN of width 72 breaks for its down projections (a
// bf16 GEMM, W8A16, and the CPU take them). The tower decides which precision
// counts: the reasoner's for the understanding Linears, each step's for the
// generation ones.
#include <gtest/gtest.h>

#include "common/error_of.hpp"
#include "common/temp_dir.hpp"
#include "cuda_test_util.hpp"
#include "stepmix/model.hpp"
#include "synthetic_checkpoint.hpp"

namespace stepmix::test {
namespace {

class CudaPlan : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    std::string why_not;
    if (!cuda::cuda_available(&why_not)) GTEST_SKIP() << "no usable CUDA GPU: " << why_not;
  }
};

TEST_F(CudaPlan, ALinearTheGpuCannotRunAtAPlannedPrecisionIsRefusedBeforeAnyStep) {
  SyntheticModelShape shape = tiny_shape(4);
  shape.intermediate_size = 72;
  const std::string folder = (dir_ / "ffn72").string();
  write_synthetic_transformer(folder, shape, true, 5);  // FP8, the 3/3 step policy, reasoner a16
  Model gpu = Model::open(folder, {ActivationDType::BF16, WeightCache::None, Device::Cuda});
  Model cpu = Model::open(folder, {ActivationDType::BF16, WeightCache::None, Device::Cpu});
  GenerateRequest r;
  r.prompt_ids = std::vector<int64_t>{5, 9, 13};
  r.latent_shape = std::array<int64_t, 4>{4, 1, 4, 4};
  r.guidance = 1.0;
  r.steps = 8;  // W8A16x3 / W8A8x2 / W8A16x3: the generation tower runs W8A8
  std::string e = error_of([&] { gpu.plan(r); });
  EXPECT_NE(e.find("[cuda] linear 'layers.0.mlp_moe_gen.down_proj': W8A8 on FP8 tensor cores needs in_features % 16 "
                   "== 0 and out_features % 8 == 0, got [32, 72]"),
            std::string::npos)
      << e;
  r.steps = 6;  // W8A16 on every step, and for the reasoner
  EXPECT_EQ(error_of([&] { gpu.plan(r); }), "");
  r.policy.mode = MixedPrecisionMode::None;  // W8A8 everywhere: the reasoner's Linears come first
  e = error_of([&] { gpu.plan(r); });
  EXPECT_NE(e.find("[cuda] linear 'layers.0.mlp.down_proj': W8A8"), std::string::npos) << e;
  EXPECT_EQ(error_of([&] { cpu.plan(r); }), "");
}

}  // namespace
}  // namespace stepmix::test
