#include "quant/governed.hpp"
#include "quant/scale_bounds.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "common/checkpoint_edit.hpp"
#include "common/golden.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

namespace fs = std::filesystem;

TEST(GovernedDiscovery, GoldenFp8CheckpointHas14PerTower) {
  const TensorStore store = TensorStore::open_folder(test::golden_path("transformer-fp8"));
  const GovernedDiscovery d = discover_governed_linears(store);
  EXPECT_EQ(d.counts.generation_fp8, 14);
  EXPECT_EQ(d.counts.reasoner_fp8, 14);
  EXPECT_EQ(d.counts.generation_dense, 0);
  EXPECT_EQ(d.counts.reasoner_dense, 0);
  ASSERT_EQ(d.linears.size(), 28u);
  for (const auto& g : d.linears) {
    EXPECT_TRUE(g.fp8);
    EXPECT_GT(g.weight_scale, 0);
    EXPECT_GT(g.input_scale, 0);
    EXPECT_EQ(g.weight->rank(), 2);
  }
  // Attention by what the code computes: add_* is the generation stream.
  auto find = [&](const std::string& m) {
    return *std::find_if(d.linears.begin(), d.linears.end(), [&](const GovernedLinear& g) { return g.module == m; });
  };
  EXPECT_EQ(find("layers.1.self_attn.add_q_proj").tower, Tower::Generation);
  EXPECT_EQ(find("layers.1.self_attn.to_q").tower, Tower::Reasoner);
  EXPECT_EQ(find("layers.0.mlp_moe_gen.down_proj").tower, Tower::Generation);
  EXPECT_EQ(find("layers.0.mlp.down_proj").tower, Tower::Reasoner);
  // Non-governed modules and norms stay 16-bit (112 tensors - 84 FP8 tensors/scales).
  EXPECT_EQ(d.kept_16bit.size(), 28u);
  EXPECT_NE(std::find(d.kept_16bit.begin(), d.kept_16bit.end(), "proj_in.weight"), d.kept_16bit.end());
}

TEST(GovernedDiscovery, Bf16CheckpointHasNoFp8) {
  const GovernedDiscovery d = discover_governed_linears(TensorStore::open_folder(test::golden_path("transformer")));
  EXPECT_FALSE(d.has_fp8());
  EXPECT_EQ(d.counts.generation_dense, 14);
  EXPECT_EQ(d.counts.reasoner_dense, 14);
}

class HostileFp8Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stepmix_gov_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    tensors_ = test::load_all_tensors(test::golden_path("transformer-fp8/diffusion_pytorch_model.safetensors"));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes the edited tensors and returns the discovery error message.
  std::string discovery_error() {
    test::write_transformer_folder(dir_, tensors_, test::golden_path("transformer-fp8/config.json"));
    try {
      discover_governed_linears(TensorStore::open_folder(dir_.string()));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  void set_scale(const std::string& name, float v) {
    *reinterpret_cast<float*>(test::find_tensor(tensors_, name)->bytes.data()) = v;
  }

  fs::path dir_;
  std::vector<TensorToWrite> tensors_;
  const std::string q_ = "layers.0.self_attn.add_q_proj";
};

TEST_F(HostileFp8Checkpoint, MissingInputScale) {
  test::erase_tensor(tensors_, q_ + ".input_scale");
  const std::string msg = discovery_error();
  EXPECT_NE(msg.find("'" + q_ + ".weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(q_ + ".input_scale' is missing"), std::string::npos) << msg;
}

TEST_F(HostileFp8Checkpoint, BadScaleValues) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 0.0f, -0.5f}) {
    tensors_ = test::load_all_tensors(test::golden_path("transformer-fp8/diffusion_pytorch_model.safetensors"));
    set_scale(q_ + ".weight_scale", bad);
    const std::string msg = discovery_error();
    EXPECT_NE(msg.find(q_ + ".weight_scale' must be finite and > 0"), std::string::npos) << bad << ": " << msg;
  }
}

TEST_F(HostileFp8Checkpoint, AbsurdScalesAreOutsideTheAcceptedRange) {
  // Finite and positive, but 3e38 overflows the first FP8 product (it passed before).
  for (float bad : {3e38f, 0x1p33f, 1e-30f}) {
    tensors_ = test::load_all_tensors(test::golden_path("transformer-fp8/diffusion_pytorch_model.safetensors"));
    set_scale(q_ + ".input_scale", bad);
    const std::string msg = discovery_error();
    EXPECT_NE(msg.find(q_ + ".input_scale' "), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find(" is outside [2^-64, 2^32]"), std::string::npos) << bad << ": " << msg;
  }
  EXPECT_FALSE(fp8_scale_problem(0x1p32f));
  EXPECT_FALSE(fp8_scale_problem(0x1p-64f));
  EXPECT_EQ(*fp8_scale_problem(3e38f), "3e+38 is outside [2^-64, 2^32], the range in which FP8 products stay finite in "
                                       "float32");
}

TEST_F(HostileFp8Checkpoint, ScaleWithTwoElements) {
  auto* s = test::find_tensor(tensors_, q_ + ".input_scale");
  *s = make_tensor_f32(s->name, {2}, {1.0f, 1.0f});
  EXPECT_NE(discovery_error().find("exactly one element"), std::string::npos);
}

TEST_F(HostileFp8Checkpoint, WeightOfWrongRank) {
  auto* w = test::find_tensor(tensors_, q_ + ".weight");
  w->shape = {64, 8, 8};
  EXPECT_NE(discovery_error().find("must be 2-D [out, in], got shape [64, 8, 8]"), std::string::npos);
}

TEST_F(HostileFp8Checkpoint, SmoothQuantScaleIsRejected) {
  tensors_.push_back(make_tensor_f32(q_ + ".pre_quant_scale", {64}, std::vector<float>(64, 1.0f)));
  EXPECT_NE(discovery_error().find(q_ + ".pre_quant_scale"), std::string::npos);
}

TEST_F(HostileFp8Checkpoint, QuantizerStateNamingIsRejected) {
  tensors_.push_back(make_tensor_f32(q_ + ".weight_quantizer._amax", {}, {1.0f}));
  const std::string msg = discovery_error();
  EXPECT_NE(msg.find("quantizer-state naming"), std::string::npos) << msg;
  EXPECT_NE(msg.find(".weight_scale and <module>.input_scale"), std::string::npos) << msg;
}

TEST_F(HostileFp8Checkpoint, Fp8OnAModuleKeptIn16Bit) {
  auto* w = test::find_tensor(tensors_, "proj_in.weight");
  *w = make_tensor_raw(w->name, DType::F8_E4M3, {64, 16}, std::vector<uint8_t>(64 * 16, 0x38).data(), 64 * 16);
  EXPECT_NE(discovery_error().find("'proj_in.weight' is F8_E4M3 on a module stepmix keeps in 16-bit"),
            std::string::npos);
}

TEST_F(HostileFp8Checkpoint, ScaleWithoutFp8Weight) {
  tensors_.push_back(make_tensor_f32("proj_in.input_scale", {}, {1.0f}));
  EXPECT_NE(discovery_error().find("'proj_in.input_scale' is a scale without an F8_E4M3"), std::string::npos);
}

}  // namespace
}  // namespace stepmix
