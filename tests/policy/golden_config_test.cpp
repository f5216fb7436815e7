// The contract against the cosmos3-tiny golden checkpoint configs, the
// per-step precision the golden trajectories were computed with, and the
// tensor names of the FP8 export.
#include <cstdint>
#include <fstream>
#include <map>

#include "common/golden.hpp"
#include "policy/policy_fixtures.hpp"

namespace stepmix::test {
namespace {

using nlohmann::json;

const std::string kFp8Config = golden_path("transformer-fp8/config.json");
const std::string kNoRuntimeConfig = golden_path("transformer-fp8-noruntime/config.json");
const std::string kBf16Config = golden_path("transformer/config.json");

std::vector<std::string> json_names(const std::vector<Precision>& precisions) {
  std::vector<std::string> names;
  for (const Precision p : precisions) names.emplace_back(precision_json_name(p));
  return names;
}

// The golden trajectory variant's per-step [generation, reasoner] precisions.
std::pair<std::vector<std::string>, std::vector<std::string>> golden_steps(const std::string& variant) {
  const json meta = read_json(golden_path("trajectory/meta.json"));
  const json& steps = meta.at("variants").at(variant);
  return {steps.at("generation").get<std::vector<std::string>>(), steps.at("reasoner").get<std::vector<std::string>>()};
}

int golden_step_count() { return read_json(golden_path("trajectory/meta.json")).at("steps").get<int>(); }

// Tensor name → dtype from a safetensors header (8-byte little-endian length, JSON).
std::map<std::string, std::string> safetensors_dtypes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char length_bytes[8];
  in.read(reinterpret_cast<char*>(length_bytes), 8);
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | length_bytes[i];
  std::string header(length, '\0');
  in.read(header.data(), static_cast<std::streamsize>(length));
  const json entries = json::parse(header);
  std::map<std::string, std::string> dtypes;
  for (const auto& [name, entry] : entries.items()) {
    if (name != "__metadata__") dtypes[name] = entry.at("dtype").get<std::string>();
  }
  return dtypes;
}

TEST(GoldenConfig, Fp8CheckpointPolicyResolvesTo3And3WithA16Reasoner) {
  const ResolvedPolicy resolved = resolve_policy(read_json(kFp8Config), kFp8Config, {});
  EXPECT_TRUE(resolved.enabled);
  EXPECT_EQ(resolved.source, "checkpoint");
  EXPECT_EQ(resolved.first_steps, 3);
  EXPECT_EQ(resolved.last_steps, 3);
  EXPECT_EQ(resolved.reasoner, TowerMode::A16);
  EXPECT_EQ(resolved.quant.kind, QuantizationKind::ModelOptFp8);
  EXPECT_EQ(resolved.quant.ignore.size(), 10u);
  EXPECT_TRUE(resolved.warnings.empty());
  EXPECT_EQ(mixed_precision_log_line(resolved, plan_steps(resolved, true, 35)),
            "mixed_precision source=checkpoint reasoner=W8A16 generation=W8A16x3 / W8A8x29 / W8A16x3");
}

TEST(GoldenConfig, Fp8PlanMatchesTheMixed33Trajectory) {
  const ResolvedPolicy resolved = resolve_policy(read_json(kFp8Config), kFp8Config, {});
  const StepPlan plan = plan_steps(resolved, true, golden_step_count());
  const auto [generation, reasoner] = golden_steps("mixed33");
  EXPECT_EQ(json_names(plan.generation), generation);
  EXPECT_EQ(std::vector<std::string>(generation.size(), std::string(precision_json_name(plan.reasoner))), reasoner);
}

TEST(GoldenConfig, ReasonerNativeOverrideMatchesItsTrajectory) {
  PolicyOverrides overrides;
  overrides.reasoner = parse_reasoner_mode("base_precision");
  const ResolvedPolicy resolved = resolve_policy(read_json(kFp8Config), kFp8Config, overrides);
  EXPECT_EQ(resolved.source, "checkpoint+override");
  const StepPlan plan = plan_steps(resolved, true, golden_step_count());
  const auto [generation, reasoner] = golden_steps("mixed33_reasoner_native");
  EXPECT_EQ(json_names(plan.generation), generation);
  EXPECT_EQ(std::vector<std::string>(generation.size(), std::string(precision_json_name(plan.reasoner))), reasoner);
}

TEST(GoldenConfig, DisabledScheduleMatchesTheW8A8Trajectory) {
  const ResolvedPolicy resolved = resolve_policy(read_json(kFp8Config), kFp8Config, {.mode = MixedPrecisionMode::None});
  const StepPlan plan = plan_steps(resolved, true, golden_step_count());
  EXPECT_EQ(json_names(plan.generation), golden_steps("w8a8").first);
  EXPECT_EQ(plan.reasoner, Precision::W8A8);
}

TEST(GoldenConfig, NullRuntimeCheckpointRunsW8A8OnEveryStep) {
  const ResolvedPolicy resolved = resolve_policy(read_json(kNoRuntimeConfig), kNoRuntimeConfig, {});
  EXPECT_FALSE(resolved.enabled);
  EXPECT_EQ(resolved.source, "no-policy");
  EXPECT_EQ(mixed_precision_log_line(resolved, plan_steps(resolved, true, 35)),
            "mixed_precision source=no-policy reasoner=W8A8 generation=W8A8x35");
}

TEST(GoldenConfig, Bf16CheckpointIsUnquantized) {
  const ResolvedPolicy resolved = resolve_policy(read_json(kBf16Config), kBf16Config, {});
  EXPECT_EQ(resolved.source, "no-policy");
  EXPECT_EQ(resolved.quant.kind, QuantizationKind::None);
  EXPECT_EQ(trace_string(plan_steps(resolved, false, 8).generation), "BF16x8");
  error_message([] { resolve_policy(read_json(kBf16Config), kBf16Config, {.mode = MixedPrecisionMode::Fp8}); },
                {kBf16Config, "no quantization_config"});
}

TEST(GoldenConfig, OnDiskPolicyOverlaysANullRuntimeApiConfig) {
  const json disk = read_json(kFp8Config);
  EXPECT_EQ(overlay_runtime_from_disk(read_json(kNoRuntimeConfig), disk), disk);
  json without_runtime = read_json(kNoRuntimeConfig);
  without_runtime["quantization_config"].erase("runtime");
  EXPECT_EQ(overlay_runtime_from_disk(without_runtime, disk), disk);
}

TEST(GoldenConfig, Fp8ExportHoldsFp8WeightsExactlyForGovernedLinears) {
  GovernedCounts counts;
  for (const auto& [tensor, dtype] : safetensors_dtypes(golden_path("transformer-fp8/diffusion_pytorch_model.safetensors"))) {
    constexpr std::string_view kWeight = ".weight";
    if (!tensor.ends_with(kWeight)) continue;
    const std::string module = tensor.substr(0, tensor.size() - kWeight.size());
    const std::optional<Tower> tower = governed_tower(module);
    EXPECT_EQ(tower.has_value(), dtype == "F8_E4M3") << tensor << " " << dtype;
    if (tower) ++(*tower == Tower::Generation ? counts.generation_fp8 : counts.reasoner_fp8);
  }
  EXPECT_EQ(counts.generation_fp8, 14);  // 2 layers x 7
  EXPECT_EQ(counts.reasoner_fp8, 14);
  const ResolvedPolicy resolved = resolve_policy(read_json(kFp8Config), kFp8Config, {});
  EXPECT_NO_THROW(check_governed_counts(resolved, counts, kFp8Config));
}

}  // namespace
}  // namespace stepmix::test
