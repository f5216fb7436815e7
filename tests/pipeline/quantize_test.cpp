// stepmix quantize: weights follow the producer's rules exactly (the golden
// FP8 export was made from the golden BF16 weights with the same rules), the
// scales reload, the policy parses, and the output appears atomically.
#include "pipeline/quantize.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <fstream>
#include <filesystem>

#include "common/error_of.hpp"
#include "common/temp_dir.hpp"
#include "io/checkpoint.hpp"
#include "model/model_test_util.hpp"
#include "quant/governed.hpp"
#include "stepmix/error.hpp"
#include "stepmix/tools.hpp"

namespace stepmix {
namespace {

namespace fs = std::filesystem;

class QuantizeTest : public test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(dir_ / "bf16");
    fs::copy(test::golden_path("transformer"), dir_ / "bf16" / "transformer", fs::copy_options::recursive);
    fs::create_directories(dir_ / "bf16" / "scheduler");
    fs::copy_file(test::golden_path("scheduler/unipc_flowshift10.json"),
                  dir_ / "bf16" / "scheduler" / "scheduler_config.json");
    settings_.model_dir = (dir_ / "bf16").string();
    settings_.out_dir = (dir_ / "fp8").string();
    settings_.calibration.prompts = {{28, 93, 12, 50, 83, 45, 72, 55, 80, 64, 77, 94, 95}, {5, 6, 7, 94, 95}};
    settings_.calibration.negative_prompt = {17, 32, 40, 94, 95};
    settings_.calibration.seeds = 1;
    settings_.calibration.steps = 4;
    settings_.calibration.latent_shape = {4, 1, 6, 8};
  }
  QuantizeSettings settings_;
};

float scalar(const TensorView& t) {
  float v;
  std::memcpy(&v, t.data, sizeof v);
  return v;
}

TEST_F(QuantizeTest, WeightsMatchTheGoldenExportBitForBitAndScalesReload) {
  const QuantizeReport report = quantize_checkpoint(settings_);
  EXPECT_EQ(report.input_amax.size(), 28u);
  EXPECT_EQ(report.transformer_calls, 2 * 1 * 4 * 2);

  const TensorStore ours = TensorStore::open_folder((dir_ / "fp8" / "transformer").string());
  const TensorStore golden = TensorStore::open_folder(test::golden_path("transformer-fp8"));
  const GovernedDiscovery d = discover_governed_linears(ours);
  EXPECT_EQ(d.counts.generation_fp8, 14);
  EXPECT_EQ(d.counts.reasoner_fp8, 14);
  for (const GovernedLinear& g : d.linears) {
    SCOPED_TRACE(g.module);
    const TensorView& want = golden.get(g.module + ".weight");
    ASSERT_EQ(g.weight->nbytes, want.nbytes);
    EXPECT_EQ(std::memcmp(g.weight->data, want.data, want.nbytes), 0);
    EXPECT_EQ(g.weight_scale, scalar(golden.get(g.module + ".weight_scale")));
    EXPECT_EQ(g.input_scale, report.input_amax.at(g.module) / 448.0f);
    EXPECT_GT(g.input_scale, 0.0f);
  }
  // Everything that is not a governed Linear is copied unchanged.
  EXPECT_EQ(ours.size(), golden.size());
  for (const std::string& name : golden.names()) {
    const TensorView& a = ours.get(name);
    if (a.dtype == DType::F8_E4M3 || name.ends_with("_scale")) continue;
    EXPECT_EQ(std::memcmp(a.data, golden.get(name).data, a.nbytes), 0) << name;
  }
  // The written policy resolves to the default 3/3 schedule.
  const ModelDirectory out = ModelDirectory::open((dir_ / "fp8").string());
  const ResolvedPolicy policy = resolve_policy(out.config, out.config_path, {});
  EXPECT_EQ(policy.source, "checkpoint");
  EXPECT_EQ(trace_string(plan_steps(policy, true, 35).generation), "W8A16x3 / W8A8x29 / W8A16x3");
  EXPECT_TRUE(fs::exists(dir_ / "fp8" / "scheduler" / "scheduler_config.json"));
  EXPECT_TRUE(fs::exists(dir_ / "fp8" / "hf_quant_config.json"));
  // The quantized model runs.
  Cosmos3Transformer model = Cosmos3Transformer::load(out);
  EXPECT_TRUE(model.has_fp8());
}

TEST_F(QuantizeTest, NoPolicyWritesRuntimeNull) {
  settings_.policy.reset();
  settings_.calibration.prompts.resize(1);
  quantize_checkpoint(settings_);
  const ModelDirectory out = ModelDirectory::open((dir_ / "fp8").string());
  EXPECT_TRUE(out.config["quantization_config"]["runtime"].is_null());
  EXPECT_EQ(resolve_policy(out.config, out.config_path, {}).source, "no-policy");
}

TEST_F(QuantizeTest, SameInputsSameBytes) {
  quantize_checkpoint(settings_);
  settings_.out_dir = (dir_ / "fp8b").string();
  quantize_checkpoint(settings_);
  for (const char* f : {"transformer/diffusion_pytorch_model.safetensors", "transformer/config.json"}) {
    std::ifstream a(dir_ / "fp8" / f, std::ios::binary), b(dir_ / "fp8b" / f, std::ios::binary);
    EXPECT_TRUE(std::equal(std::istreambuf_iterator<char>(a), {}, std::istreambuf_iterator<char>(b))) << f;
  }
}

TEST_F(QuantizeTest, RefusesExistingOutputAndQuantizedInput) {
  fs::create_directories(settings_.out_dir);
  EXPECT_THROW(quantize_checkpoint(settings_), Error);
  EXPECT_TRUE(fs::is_empty(settings_.out_dir));
  fs::remove_all(settings_.out_dir);
  fs::create_directories(dir_ / "fp8in");
  fs::copy(test::golden_path("transformer-fp8"), dir_ / "fp8in" / "transformer", fs::copy_options::recursive);
  settings_.model_dir = (dir_ / "fp8in").string();
  try {
    quantize_checkpoint(settings_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already quantized"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(settings_.out_dir));
}

TEST_F(QuantizeTest, WhatCannotBeWrittenIsRefusedBeforeCalibrating) {
  // An output inside the model would be copied into itself.
  settings_.out_dir = (dir_ / "bf16" / "q8").string();
  std::string e = test::error_of([&] { quantize_checkpoint(settings_); });
  EXPECT_NE(e.find("--out " + settings_.out_dir + ": is inside " + settings_.model_dir + ", which is copied into it"),
            std::string::npos)
      << e;
  EXPECT_FALSE(fs::exists(settings_.out_dir));
  // Or inside a folder the model links to, which the copy follows.
  fs::create_directories(dir_ / "shared-scheduler");
  fs::copy(dir_ / "bf16" / "scheduler", dir_ / "shared-scheduler", fs::copy_options::recursive);
  fs::remove_all(dir_ / "bf16" / "scheduler");
  fs::create_directory_symlink(dir_ / "shared-scheduler", dir_ / "bf16" / "scheduler");
  settings_.out_dir = (dir_ / "shared-scheduler" / "q8").string();
  e = test::error_of([&] { quantize_checkpoint(settings_); });
  EXPECT_NE(e.find("is inside " + (dir_ / "bf16" / "scheduler").string() + ", which is copied into it"),
            std::string::npos)
      << e;
  EXPECT_FALSE(fs::exists(settings_.out_dir));
  // A policy that the written checkpoint's first load would refuse.
  settings_.out_dir = (dir_ / "fp8").string();
  settings_.policy = StepPolicy{-2, 3};
  e = test::error_of([&] { quantize_checkpoint(settings_); });
  EXPECT_NE(e.find("[policy] the policy to write (--policy): "), std::string::npos) << e;
  EXPECT_NE(e.find("first_steps"), std::string::npos) << e;
  settings_.policy = StepPolicy{};
  settings_.policy->scope.clear();
  e = test::error_of([&] { quantize_checkpoint(settings_); });
  EXPECT_NE(e.find("scope"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(settings_.out_dir));
}

TEST_F(QuantizeTest, RequestFieldsItDoesNotUseAreRefused) {
  QuantizeOptions o;
  o.model_dir = settings_.model_dir;
  o.out_dir = settings_.out_dir;
  const auto refused = [&](const std::function<void(GenerateRequest&)>& set, const std::string& want) {
    o.request = {};
    set(o.request);
    const std::string e = test::error_of([&] { quantize(o, stdout); });
    EXPECT_NE(e.find(want), std::string::npos) << e;
  };
  refused([](GenerateRequest& r) { r.noise = std::vector<float>(192, 0.0f); },
          "[quantize] request.noise is not used here (each trajectory's noise is drawn from its seed); leave it unset");
  refused([](GenerateRequest& r) { r.prompt_ids = std::vector<int64_t>{1, 2}; }, "request.prompt_ids is not used here");
  refused([](GenerateRequest& r) { r.seed = 7; }, "request.seed is not used here");
  refused([](GenerateRequest& r) { r.flow_shift = 3.0; }, "request.flow_shift is not used here");
  refused([](GenerateRequest& r) { r.policy.first_steps = 2; }, "request.policy is not used here");
  refused([](GenerateRequest& r) { r.fps = 1e-39; }, "request.fps: expected a number in [0.01, 1000], got 1e-39");
  EXPECT_FALSE(fs::exists(settings_.out_dir));
}

// The summary line says the policy that was written (its overlap is always a16).
TEST_F(QuantizeTest, SummaryNamesThePolicyItWrote) {
  QuantizeOptions o;
  o.model_dir = std::string(STEPMIX_MODELS_DIR) + "/fashion-cosmos3-bf16";
  o.out_dir = (dir_ / "q").string();
  o.calib_prompts = (dir_ / "prompts.txt").string();
  std::ofstream(*o.calib_prompts) << "ankle boot\n";
  o.calib_seeds = 1;
  o.request.steps = 1;
  o.policy = StepPolicy{.first_steps = 2, .last_steps = 1, .reasoner = TowerMode::Native};
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  quantize(o, f);
  std::rewind(f);
  std::string printed(4096, '\0');
  printed.resize(std::fread(printed.data(), 1, printed.size(), f));
  std::fclose(f);
  EXPECT_NE(printed.find("policy: first_last_n 2/1, reasoner native\n"), std::string::npos) << printed;
  const ModelDirectory out = ModelDirectory::open(o.out_dir);
  const auto& policy = out.config["quantization_config"]["runtime"]["diffusion_step_policy"];
  EXPECT_EQ(policy["reasoner"], "native");
  EXPECT_EQ(policy["first_steps"]["count"], 2);
  EXPECT_EQ(policy["last_steps"]["count"], 1);
}

TEST_F(QuantizeTest, FailedCalibrationLeavesNothingBehind) {
  settings_.calibration.prompts = {{1, 200}};  // id outside the vocabulary: the first forward fails
  EXPECT_THROW(quantize_checkpoint(settings_), Error);
  for (const auto& e : fs::directory_iterator(dir_)) EXPECT_EQ(e.path().filename().string().find("fp8"), std::string::npos);
}

}  // namespace
}  // namespace stepmix
