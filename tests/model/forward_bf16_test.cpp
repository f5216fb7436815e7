// The forward with bf16 activations (ActivationDType::BF16) against the
// float32 path on the golden cases, the cache keyed by activation dtype,
// thread-count independence and scratch reuse.
//
// Bounds (golden README §9): the README measures `bf16_linear_inputs`, every
// Linear input rounded to bf16, at max|a-g|/max|g| = 4.7e-3 (dense), 4.9e-3
// (W8A16) and 5.5e-2 (W8A8 free running) on the velocity. Its rule for a
// bound is 5x the worst legitimate deviation (2x for the heavy-tailed
// free-running W8A8), rounded up to 1/2/5 x 10^k: 5e-2, 5e-2 and 2e-1. The
// BF16 path also rounds Linear outputs, attention operands, softmax weights
// and the W8A16 weight Ŵ; each is one more rounding of the same 2^-9 relative
// size, which the 5x margin covers (the measured values below show by how
// much). The float32 path is within 1e-6 of the goldens, so comparing with it
// or with the goldens is the same test.
#include <filesystem>

#include "core/thread_pool.hpp"
#include "synthetic_checkpoint.hpp"
#include "model_test_util.hpp"

namespace stepmix::test {
namespace {

// The bounds (kBf16DenseBound, ...) are in model_test_util.hpp: the CUDA
// backend's forwards share them.

HostTensor forward_in(Cosmos3Transformer& model, ActivationDType dtype, const ForwardInputs& in, Precision mode,
                      ForwardDebug* debug = nullptr) {
  return model.forward(in, {mode, mode, dtype, debug});
}

struct Worst {
  double value = 0;
  std::string where;
  void add(double d, const std::string& name) {
    if (d > value) value = d, where = name;
  }
};

void report(const char* what, const Worst& velocity, const Worst& hidden, double bound) {
  std::printf("[ measured ] bf16 vs f32 %-18s velocity %.2e at %s, hidden states %.2e at %s (bound %.0e)\n", what,
              velocity.value, velocity.where.c_str(), hidden.value, hidden.where.c_str(), bound);
}

void compare_modes(const std::string& folder, Precision mode, double bound, const char* label) {
  Cosmos3Transformer model = load_tiny(folder);
  Worst velocity, hidden;
  for (const std::string& name : forward_cases()) {
    const ForwardInputs in = read_forward_inputs(*open_forward_case(name));
    ForwardDebug f32_debug, bf16_debug;
    const HostTensor f32 = forward_in(model, ActivationDType::F32, in, mode, &f32_debug);
    const HostTensor bf16 = forward_in(model, ActivationDType::BF16, in, mode, &bf16_debug);
    ASSERT_EQ(f32.shape, bf16.shape);
    const double d = max_normalised_deviation(bf16.data, f32.data);
    EXPECT_LE(d, bound) << label << " " << name;
    velocity.add(d, name);
    for (const auto& [tensor, value] : f32_debug.tensors)
      if (tensor.find("_hidden.") != std::string::npos)
        hidden.add(max_normalised_deviation(bf16_debug.tensors.at(tensor).data, value.data), name + ":" + tensor);
  }
  report(label, velocity, hidden, bound);
}

TEST(ForwardBf16, DenseWithinTheBf16Bound) { compare_modes("transformer", Precision::BF16, kBf16DenseBound, "dense"); }

TEST(ForwardBf16, W8A16WithinTheBf16Bound) {
  compare_modes("transformer-fp8", Precision::W8A16, kBf16W8A16Bound, "w8a16");
}

TEST(ForwardBf16, W8A8FreeRunningWithinTheBf16Bound) {
  compare_modes("transformer-fp8", Precision::W8A8, kBf16W8A8FreeRunningBound, "w8a8 free running");
}

TEST(ForwardBf16, W8A8WithStoredCodesWithinTheDenseBf16Bound) {
  Worst velocity;
  for (const std::string& name : forward_cases()) {
    Cosmos3Transformer model = load_tiny("transformer-fp8");
    auto golden = open_forward_case(name);
    int calls = 0;
    force_stored_codes(model, golden, calls);
    const HostTensor v =
        model.forward(read_forward_inputs(*golden), {Precision::W8A8, Precision::W8A8, ActivationDType::BF16});
    EXPECT_EQ(calls, 28) << name;
    const double d = max_normalised_deviation(v.data, golden_floats(*golden, "velocity_w8a8"));
    EXPECT_LE(d, kBf16W8A8ForcedBound) << name;
    velocity.add(d, name);
  }
  report("w8a8 stored codes", velocity, Worst{}, kBf16W8A8ForcedBound);
}

TEST(ForwardBf16, UnderstandingCacheIsKeyedByActivationDType) {
  Cosmos3Transformer model = load_tiny("transformer");
  Cosmos3Transformer fresh = load_tiny("transformer");
  const ForwardInputs in = read_forward_inputs(*open_forward_case("video"));
  forward_in(model, ActivationDType::F32, in, Precision::BF16);
  const HostTensor bf16 = forward_in(model, ActivationDType::BF16, in, Precision::BF16);
  EXPECT_EQ(model.understanding_cache().hits(), 0u) << "float32 K/V must not serve a bf16 forward";
  EXPECT_EQ(bf16.data, forward_in(fresh, ActivationDType::BF16, in, Precision::BF16).data);
  EXPECT_EQ(forward_in(model, ActivationDType::BF16, in, Precision::BF16).data, bf16.data);
  EXPECT_EQ(model.understanding_cache().hits(), 1u);
}

// A model with head_dim 128, so that the AVX-512 attention and pointwise
// kernels run inside the forward (the tiny goldens have head_dim 16).
class SyntheticModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    folder_ = (std::filesystem::temp_directory_path() /
               ("stepmix-forward-bf16-" + std::to_string(::getpid())))
                  .string();
    shape_.hidden_size = 256, shape_.intermediate_size = 512, shape_.layers = 2;
    shape_.heads = 2, shape_.kv_heads = 1, shape_.head_dim = 128, shape_.vocab_size = 64, shape_.latent_channel = 4;
    write_synthetic_transformer(folder_, shape_, /*fp8=*/false, 7);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(folder_); }
  static Cosmos3Transformer load() { return Cosmos3Transformer::load(ModelDirectory::open(folder_)); }

  static inline std::string folder_;
  static inline SyntheticModelShape shape_;
};

TEST_F(SyntheticModel, SameBitsOnOneThreadAndOnThePool) {
  const ForwardInputs in = synthetic_inputs(shape_, 9, 22, 18, 500.0f, 3);
  for (ActivationDType dtype : {ActivationDType::F32, ActivationDType::BF16}) {
    Cosmos3Transformer pooled = load(), single = load();
    const HostTensor a = forward_in(pooled, dtype, in, Precision::BF16);
    HostTensor b;
    // Inside a task of another pool, every parallel_for of the forward runs inline.
    ThreadPool outer(2);
    outer.parallel_for(2, [&](int64_t task) {
      if (task == 0) b = forward_in(single, dtype, in, Precision::BF16);
    });
    EXPECT_EQ(a.data, b.data) << activation_dtype_name(dtype);
  }
}

TEST_F(SyntheticModel, Bf16StaysNearFloat32AndReusesItsScratch) {
  Cosmos3Transformer model = load();
  model.understanding_cache().set_capacity(0);
  const ForwardInputs in = synthetic_inputs(shape_, 9, 22, 18, 500.0f, 4);
  const HostTensor f32 = forward_in(model, ActivationDType::F32, in, Precision::BF16);
  const HostTensor bf16 = forward_in(model, ActivationDType::BF16, in, Precision::BF16);
  const std::size_t scratch = model.workspace_bytes();
  const double d = max_normalised_deviation(bf16.data, f32.data);
  std::printf("[ measured ] synthetic head_dim 128 model: bf16 vs f32 velocity %.2e (bound %.0e)\n", d, kBf16DenseBound);
  EXPECT_LE(d, kBf16DenseBound);
  EXPECT_EQ(forward_in(model, ActivationDType::BF16, in, Precision::BF16).data, bf16.data);
  EXPECT_EQ(model.workspace_bytes(), scratch) << "a repeated call must not grow the scratch";
}

}  // namespace
}  // namespace stepmix::test
