// §8.1 tower classification and §8.3 presence check.
#include "policy/policy_fixtures.hpp"

namespace stepmix::test {
namespace {

const std::vector<std::string> kGenerationSuffixes{
    "self_attn.add_q_proj", "self_attn.add_k_proj", "self_attn.add_v_proj",  "self_attn.to_add_out",
    "mlp_moe_gen.gate_proj", "mlp_moe_gen.up_proj", "mlp_moe_gen.down_proj"};
const std::vector<std::string> kReasonerSuffixes{"self_attn.to_q", "self_attn.to_k", "self_attn.to_v", "self_attn.to_out",
                                                 "mlp.gate_proj",  "mlp.up_proj",    "mlp.down_proj"};

TEST(GovernedTower, VisionStreamProjectionsAreGeneration) {
  for (const auto& suffix : kGenerationSuffixes) {
    EXPECT_EQ(governed_tower("layers.0." + suffix), Tower::Generation) << suffix;
    EXPECT_EQ(governed_tower("layers.35." + suffix), Tower::Generation) << suffix;
  }
}

TEST(GovernedTower, TextStreamProjectionsAreReasoner) {
  for (const auto& suffix : kReasonerSuffixes) {
    EXPECT_EQ(governed_tower("layers.0." + suffix), Tower::Reasoner) << suffix;
    EXPECT_EQ(governed_tower("layers.12." + suffix), Tower::Reasoner) << suffix;
  }
}

TEST(GovernedTower, BF16ModulesAreNotGoverned) {
  for (const char* name : {"proj_in", "proj_out", "time_embedder.linear_1", "time_embedder.linear_2", "lm_head",
                           "embed_tokens", "layers.0.self_attn.norm_q", "layers.0.self_attn.norm_added_k",
                           "layers.0.input_layernorm", "layers.0.post_attention_layernorm_moe_gen", "norm_moe_gen"}) {
    EXPECT_EQ(governed_tower(name), std::nullopt) << name;
  }
}

TEST(GovernedTower, PathMustBeACanonicalLayerModule) {
  for (const char* name : {"layers.x.self_attn.to_q", "layers..self_attn.to_q", "layers.01.self_attn.to_q",
                           "layers.-1.mlp.up_proj", "layers.0.self_attn.to_q.weight", "model.layers.0.mlp.up_proj",
                           "layers.0.self_attn.to_out.0", "layers.0.mlp_moe_gen", "layers.0", "layers.0.to_q",
                           "layers.0.visual.mlp.up_proj"}) {
    EXPECT_EQ(governed_tower(name), std::nullopt) << name;
  }
}

ResolvedPolicy enabled_with_reasoner(TowerMode reasoner) {
  ResolvedPolicy policy;
  policy.enabled = true;
  policy.source = "checkpoint";
  policy.first_steps = policy.last_steps = 3;
  policy.reasoner = reasoner;
  return policy;
}

TEST(GovernedCountsCheck, FullFp8CheckpointPasses) {
  EXPECT_NO_THROW(check_governed_counts(enabled_with_reasoner(TowerMode::A16), {14, 14, 0, 0}, "/ckpt"));
}

TEST(GovernedCountsCheck, ScheduleOnNeedsFp8GenerationLinears) {
  const std::string message = error_message(
      [] { check_governed_counts(enabled_with_reasoner(TowerMode::Native), {0, 14, 14, 0}, "/ckpt"); }, {});
  EXPECT_EQ(message,
            "[policy] /ckpt: no compatible serialised ModelOpt FP8 Linears under generation tower; counts=generation_fp8=0 "
            "generation_dense=14 reasoner_fp8=14 reasoner_dense=0 (mixed_precision source=checkpoint)");
}

TEST(GovernedCountsCheck, A16ReasonerNeedsFp8ReasonerLinears) {
  error_message([] { check_governed_counts(enabled_with_reasoner(TowerMode::A16), {14, 0, 0, 14}, "/ckpt"); },
                {"under reasoner tower; counts=generation_fp8=14"});
}

TEST(GovernedCountsCheck, NativeReasonerMayBeDense) {
  EXPECT_NO_THROW(check_governed_counts(enabled_with_reasoner(TowerMode::Native), {14, 0, 0, 14}, "/ckpt"));
}

TEST(GovernedCountsCheck, ScheduleOffChecksNothing) {
  EXPECT_NO_THROW(check_governed_counts(ResolvedPolicy{}, {}, "/ckpt"));
}

}  // namespace
}  // namespace stepmix::test
