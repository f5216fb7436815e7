// The rotary tables kept in backend memory across forwards
// (model/rope_cache.hpp): built and uploaded once per distinct position ids,
// the same tables as build_rope_tables bit for bit, rebuilt when the
// positions change (also by the sign of a zero), unaffected by the forward
// workspace growing, and forwards with the cache give the bits of forwards
// without it, single, batched and resident alike.
#include "model_test_util.hpp"

namespace stepmix::test {
namespace {

std::vector<float> downloaded(const float* device, std::size_t n) {
  std::vector<float> out(n);
  cpu_backend().download(out.data(), device, n * sizeof(float));
  return out;
}

TEST(RopeCache, HoldsTheHostTablesAndKeysOnThePositionBits) {
  const Cosmos3Transformer model = load_tiny("transformer");
  const Cosmos3Config& c = model.config();
  const ForwardInputs in = read_forward_inputs(*open_forward_case("video"));
  const int64_t S = int64_t(in.position_ids.size() / 3), D = c.head_dim;
  RopeCache cache;
  const auto entry = cache.get(c, cpu_backend(), in.position_ids);
  const RopeTables host = build_rope_tables(c, in.position_ids.data(), S);
  EXPECT_TRUE(same_bits(downloaded(entry->cos(), std::size_t(S * D)), host.cos));
  EXPECT_TRUE(same_bits(downloaded(entry->sin(), std::size_t(S * D)), host.sin));
  EXPECT_EQ(cache.get(c, cpu_backend(), in.position_ids), entry);
  EXPECT_EQ(cache.builds(), 1u);
  EXPECT_EQ(cache.bytes(), std::size_t(2 * S * D) * sizeof(float));

  // -0 == 0, but sin(-0) is -0: a different key.
  std::vector<float> negative_zero = in.position_ids;
  const auto zero = std::find(negative_zero.begin(), negative_zero.end(), 0.0f);
  ASSERT_NE(zero, negative_zero.end());
  *zero = -0.0f;
  EXPECT_NE(cache.get(c, cpu_backend(), negative_zero), entry);
  EXPECT_EQ(cache.builds(), 2u);

  // Capacity 2: a third key evicts the least recently used; what a caller
  // holds stays valid.
  std::vector<float> shifted = in.position_ids;
  for (float& p : shifted) p += 1.0f;
  cache.get(c, cpu_backend(), shifted);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.builds(), 3u);
  EXPECT_TRUE(same_bits(downloaded(entry->cos(), std::size_t(S * D)), host.cos));
  EXPECT_NE(cache.get(c, cpu_backend(), in.position_ids), entry);  // evicted, built again
  EXPECT_EQ(cache.builds(), 4u);
}

TEST(RopeCache, RepeatedForwardsBuildTheTablesOnceAndNewPositionsRebuild) {
  Cosmos3Transformer model = load_tiny("transformer-fp8");
  const ForwardOptions options{Precision::W8A8, Precision::W8A8, ActivationDType::BF16};
  const ForwardInputs cond = read_forward_inputs(*open_forward_case("video")), uncond = shorter_prompt(cond);
  const HostTensor first = model.forward(cond, options);
  const HostTensor second = model.forward(cond, options);
  EXPECT_EQ(model.rope_cache().builds(), 1u);
  EXPECT_TRUE(same_bits(first.data, second.data));

  // Other tokens at the same positions: the same tables.
  ForwardInputs other_tokens = cond;
  std::swap(other_tokens.input_ids.front(), other_tokens.input_ids.back());
  model.forward(other_tokens, options);
  EXPECT_EQ(model.rope_cache().builds(), 1u);

  model.forward(uncond, options);  // another prompt length: other positions
  EXPECT_EQ(model.rope_cache().builds(), 2u);
  model.forward(cond, options);
  model.forward(uncond, options);
  EXPECT_EQ(model.rope_cache().builds(), 2u) << "both CFG passes' tables stay";
}

TEST(RopeCache, TablesOutliveTheWorkspaceGrowing) {
  Cosmos3Transformer model = load_tiny("transformer");
  model.rope_cache().set_capacity(8);
  const ForwardOptions options{Precision::BF16, Precision::BF16};
  const ForwardInputs image = read_forward_inputs(*open_forward_case("image"));
  const HostTensor first = model.forward(image, options);
  const std::size_t before = model.workspace_bytes();
  for (const std::string& name : forward_cases()) model.forward(read_forward_inputs(*open_forward_case(name)), options);
  EXPECT_GT(model.workspace_bytes(), before) << "a larger latent reallocates the workspace slots";
  const std::size_t builds = model.rope_cache().builds();
  EXPECT_TRUE(same_bits(model.forward(image, options).data, first.data));
  EXPECT_EQ(model.rope_cache().builds(), builds) << "the image's tables came from the cache";
}

TEST(RopeCache, CachedAndUncachedForwardsGiveTheSameBits) {
  Cosmos3Transformer cached = load_tiny("transformer-fp8"), uncached = load_tiny("transformer-fp8");
  uncached.rope_cache().set_capacity(0);
  const ForwardInputs cond = read_forward_inputs(*open_forward_case("cond")), uncond = shorter_prompt(cond);
  const ForwardInputs* both[2] = {&cond, &uncond};
  const ForwardInputs* reversed[2] = {&uncond, &cond};
  for (ActivationDType activations : {ActivationDType::F32, ActivationDType::BF16}) {
    const ForwardOptions options{Precision::W8A16, Precision::W8A16, activations};
    for (int round = 0; round < 2; ++round) {  // the second round reads every table from the cache
      SCOPED_TRACE(std::string(activation_dtype_name(activations)) + " round " + std::to_string(round));
      const std::vector<HostTensor> a = cached.forward_batch(both, options), b = uncached.forward_batch(both, options);
      for (std::size_t i = 0; i < 2; ++i) EXPECT_TRUE(same_bits(a[i].data, b[i].data)) << "batch sample " << i;
      EXPECT_TRUE(same_bits(cached.forward(cond, options).data, uncached.forward(cond, options).data));
      EXPECT_TRUE(same_bits(cached.forward(uncond, options).data, uncached.forward(uncond, options).data));
      const std::vector<HostTensor> c = cached.forward_batch(reversed, options);
      EXPECT_TRUE(same_bits(c[0].data, a[1].data));
      EXPECT_TRUE(same_bits(c[1].data, a[0].data));
    }
  }
  EXPECT_EQ(cached.rope_cache().builds(), 2u);
  EXPECT_EQ(uncached.rope_cache().builds(), 2u * 2 * (2 + 1 + 1));
  EXPECT_EQ(uncached.rope_cache().size(), 0u);
}

TEST(RopeCache, DebugRecordsTheHostTablesOnACacheHit) {
  Cosmos3Transformer model = load_tiny("transformer");
  const ForwardInputs in = read_forward_inputs(*open_forward_case("image"));
  const ForwardOptions plain{Precision::BF16, Precision::BF16};
  const HostTensor velocity = model.forward(in, plain);
  ForwardDebug debug;
  ForwardOptions recorded = plain;
  recorded.debug = &debug;
  EXPECT_TRUE(same_bits(model.forward(in, recorded).data, velocity.data));
  EXPECT_EQ(model.rope_cache().builds(), 1u);
  const RopeTables host = build_rope_tables(model.config(), in.position_ids.data(), int64_t(in.position_ids.size() / 3));
  EXPECT_TRUE(same_bits(debug.tensors.at("rope.cos").data, host.cos));
  EXPECT_TRUE(same_bits(debug.tensors.at("rope.sin").data, host.sin));
}

}  // namespace
}  // namespace stepmix::test
