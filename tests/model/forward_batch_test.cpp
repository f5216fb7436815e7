// Several samples through one forward (CFG batching) return, bit for bit,
// what each returns alone: on the tiny golden checkpoints (dense BF16 and
// ModelOpt FP8 at W8A16 and W8A8), float32 and bf16 activations, samples of
// different prompt lengths, latent sizes, frame counts and conditioning masks
// in one batch. The kernels are the active ones; ctest runs this suite again
// under STEPMIX_ISA=avx512 and STEPMIX_ISA=ref (tests/CMakeLists.txt), and
// tests/kernels checks GEMM rows against M for every variant directly.
#include <cstdlib>
#include <cstring>

#include "kernels/kernel_set.hpp"
#include "model_test_util.hpp"
#include "stepmix/error.hpp"

namespace stepmix::test {
namespace {

// The variant STEPMIX_ISA forces runs on this CPU (else the suite skips).
bool forced_variant_runs() {
  const char* forced = std::getenv("STEPMIX_ISA");
  if (!forced || !*forced) return true;
  try {
    kernels::kernel_variant(forced);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::vector<ForwardInputs> golden_inputs() {
  std::vector<ForwardInputs> out;
  for (const std::string& name : forward_cases()) out.push_back(read_forward_inputs(*open_forward_case(name)));
  return out;
}

void expect_batch_equals_singles(const std::string& folder, Precision p, ActivationDType activations,
                                 const std::vector<std::size_t>& order) {
  const std::vector<ForwardInputs> inputs = golden_inputs();
  Cosmos3Transformer model = load_tiny(folder);
  model.understanding_cache().set_capacity(0);  // every call computes the understanding K/V
  const ForwardOptions options{p, p, activations};
  std::vector<const ForwardInputs*> batch;
  for (std::size_t i : order) batch.push_back(&inputs[i]);
  const std::vector<HostTensor> batched = model.forward_batch(batch, options);
  ASSERT_EQ(batched.size(), order.size());
  for (std::size_t j = 0; j < order.size(); ++j) {
    const HostTensor alone = model.forward(inputs[order[j]], options);
    EXPECT_EQ(batched[j].shape, alone.shape);
    EXPECT_TRUE(same_bits(batched[j].data, alone.data))
        << folder << " " << precision_json_name(p) << " " << activation_dtype_name(activations) << ": sample "
        << forward_cases()[order[j]] << " at position " << j << " of the batch, max deviation "
        << max_normalised_deviation(batched[j].data, alone.data);
  }
}

class ForwardBatch : public ::testing::TestWithParam<ActivationDType> {
 protected:
  void SetUp() override {
    if (!forced_variant_runs()) GTEST_SKIP() << "STEPMIX_ISA names a variant this CPU cannot run";
  }
};

TEST_P(ForwardBatch, DenseBatchEqualsSeparatePasses) {
  expect_batch_equals_singles("transformer", Precision::BF16, GetParam(), {0, 1, 2, 3});
}

TEST_P(ForwardBatch, W8A16BatchEqualsSeparatePasses) {
  expect_batch_equals_singles("transformer-fp8", Precision::W8A16, GetParam(), {2, 0, 3, 1});
}

TEST_P(ForwardBatch, W8A8BatchEqualsSeparatePasses) {
  expect_batch_equals_singles("transformer-fp8", Precision::W8A8, GetParam(), {3, 2, 1, 0});
}

// The CFG shape: the same latent twice with two prompts of different lengths.
TEST_P(ForwardBatch, SameLatentTwoPromptsEqualsSeparatePasses) {
  const std::vector<ForwardInputs> inputs = golden_inputs();
  const ForwardInputs cond = inputs[0], uncond = shorter_prompt(cond);
  Cosmos3Transformer model = load_tiny("transformer-fp8");
  for (Precision p : {Precision::W8A16, Precision::W8A8}) {
    const ForwardOptions options{p, p, GetParam()};
    const ForwardInputs* both[2] = {&cond, &uncond};
    const std::vector<HostTensor> batched = model.forward_batch(both, options);
    EXPECT_TRUE(same_bits(batched[0].data, model.forward(cond, options).data)) << precision_json_name(p);
    EXPECT_TRUE(same_bits(batched[1].data, model.forward(uncond, options).data)) << precision_json_name(p);
    EXPECT_FALSE(same_bits(batched[0].data, batched[1].data)) << "the two prompts must give different velocities";
  }
}

INSTANTIATE_TEST_SUITE_P(Activations, ForwardBatch, ::testing::Values(ActivationDType::F32, ActivationDType::BF16),
                         [](const auto& info) { return std::string(activation_dtype_name(info.param)); });

TEST(ForwardBatchErrors, EmptyBatchAndDebugRecordsOfABatchAreRefused) {
  Cosmos3Transformer model = load_tiny("transformer");
  const std::vector<ForwardInputs> inputs = golden_inputs();
  EXPECT_THROW(model.forward_batch({}, {Precision::BF16, Precision::BF16}), Error);
  ForwardDebug debug;
  const ForwardInputs* two[2] = {&inputs[0], &inputs[1]};
  EXPECT_THROW(model.forward_batch(two, {Precision::BF16, Precision::BF16, ActivationDType::F32, &debug}), Error);
}

}  // namespace
}  // namespace stepmix::test
