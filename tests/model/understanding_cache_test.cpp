// The understanding-stream K/V cache: a hit gives what full recomputation
// gives, across denoising steps (new latent and timestep), alternating
// prompts (CFG), and a key that includes the reasoner precision.
#include "model_test_util.hpp"

namespace stepmix::test {
namespace {

// The same prompt at a later denoising step: another latent and timestep.
ForwardInputs later_step(ForwardInputs in) {
  for (float& x : in.latent.data) x = 0.5f * x + 0.25f;
  for (float& t : in.timesteps) t = 421.0f;
  return in;
}

void expect_close(const HostTensor& a, const HostTensor& b) {
  ASSERT_EQ(a.shape, b.shape);
  EXPECT_LE(max_normalised_deviation(a.data, b.data), 1e-6);
}

TEST(UnderstandingCache, HitEqualsRecomputationAcrossSteps) {
  Cosmos3Transformer cached = load_tiny("transformer");
  Cosmos3Transformer uncached = load_tiny("transformer");
  uncached.understanding_cache().set_capacity(0);
  const ForwardInputs step0 = read_forward_inputs(*open_forward_case("video"));
  const ForwardInputs step1 = later_step(step0);

  cached.forward(step0, {Precision::BF16, Precision::BF16});
  const HostTensor from_cache = cached.forward(step1, {Precision::BF16, Precision::BF16});
  EXPECT_EQ(cached.understanding_cache().hits(), 1u);
  const HostTensor recomputed = uncached.forward(step1, {Precision::BF16, Precision::BF16});
  EXPECT_EQ(uncached.understanding_cache().size(), 0u);
  expect_close(from_cache, recomputed);
}

TEST(UnderstandingCache, AlternatingCondAndUncondPromptsBothHit) {
  Cosmos3Transformer model = load_tiny("transformer");
  const ForwardInputs cond = read_forward_inputs(*open_forward_case("image"));
  ForwardInputs uncond = cond;
  uncond.input_ids[0] = (uncond.input_ids[0] + 1) % 94;  // another prompt, same layout
  const HostTensor first_cond = model.forward(cond, {Precision::BF16, Precision::BF16});
  const HostTensor first_uncond = model.forward(uncond, {Precision::BF16, Precision::BF16});
  EXPECT_NE(first_cond.data, first_uncond.data);
  expect_close(model.forward(cond, {Precision::BF16, Precision::BF16}), first_cond);
  expect_close(model.forward(uncond, {Precision::BF16, Precision::BF16}), first_uncond);
  EXPECT_EQ(model.understanding_cache().hits(), 2u);
  EXPECT_EQ(model.understanding_cache().size(), 2u);
}

TEST(UnderstandingCache, KeyIncludesReasonerPrecision) {
  Cosmos3Transformer model = load_tiny("transformer-fp8");
  Cosmos3Transformer uncached = load_tiny("transformer-fp8");
  uncached.understanding_cache().set_capacity(0);
  const ForwardInputs in = read_forward_inputs(*open_forward_case("odd"));

  const HostTensor a16 = model.forward(in, {Precision::W8A8, Precision::W8A16});
  const HostTensor native = model.forward(in, {Precision::W8A8, Precision::W8A8});
  EXPECT_EQ(model.understanding_cache().hits(), 0u) << "a W8A16 reasoner entry must not serve a W8A8 reasoner";
  EXPECT_NE(a16.data, native.data);
  expect_close(native, uncached.forward(in, {Precision::W8A8, Precision::W8A8}));
  // The generation tower's precision is not part of the key.
  const HostTensor gen_a16 = model.forward(later_step(in), {Precision::W8A16, Precision::W8A8});
  EXPECT_EQ(model.understanding_cache().hits(), 1u);
  expect_close(gen_a16, uncached.forward(later_step(in), {Precision::W8A16, Precision::W8A8}));
}

TEST(UnderstandingCache, DebugCallsRecomputeAndRecordTheTextStream) {
  Cosmos3Transformer model = load_tiny("transformer");
  const ForwardInputs in = read_forward_inputs(*open_forward_case("cond"));
  model.forward(in, {Precision::BF16, Precision::BF16});
  ForwardDebug debug;
  model.forward(in, {Precision::BF16, Precision::BF16, ActivationDType::F32, &debug});
  EXPECT_EQ(model.understanding_cache().hits(), 0u);
  EXPECT_TRUE(debug.tensors.count("und_hidden.1"));
}

TEST(UnderstandingCache, EvictsTheLeastRecentlyUsedPrompt) {
  UnderstandingCache cache(2);
  auto kv = std::make_shared<UnderstandingKV>();
  auto key = [](int64_t id) { return UnderstandingKey{{id}, {0.0f, 0.0f, 0.0f}, Precision::BF16}; };
  cache.insert(key(1), kv);
  cache.insert(key(2), kv);
  EXPECT_TRUE(cache.find(key(1)));  // 1 is now the most recent
  cache.insert(key(3), kv);         // evicts 2
  EXPECT_TRUE(cache.find(key(1)));
  EXPECT_FALSE(cache.find(key(2)));
  EXPECT_TRUE(cache.find(key(3)));
  // Positions compare bit for bit: -0 is another key than +0.
  EXPECT_FALSE(cache.find(UnderstandingKey{{1}, {-0.0f, 0.0f, 0.0f}, Precision::BF16}));
}

}  // namespace
}  // namespace stepmix::test
