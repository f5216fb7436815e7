// The up-front memory estimate of a run (model/memory_estimate.hpp) against
// what the forward really allocates: its workspace part must be exactly the
// scratch the forwards grow to (so the estimate follows forward_pass.cpp),
// the rest must add up from the checkpoint and the prompts.
#include <array>

#include "model/memory_estimate.hpp"
#include "model_test_util.hpp"

namespace stepmix::test {
namespace {

PatchGrid grid_of(const ForwardInputs& in, const Cosmos3Config& c) { return resolve_forward_geometry(in, c).grid; }

TEST(DeviceMemoryEstimate, WorkspaceIsWhatTheForwardsGrowTo) {
  for (ActivationDType dtype : {ActivationDType::F32, ActivationDType::BF16}) {
    for (const std::string folder : {"transformer", "transformer-fp8"}) {
      const Precision mode = folder == "transformer" ? Precision::BF16 : Precision::W8A8;
      for (const std::string& name : forward_cases()) {
        Cosmos3Transformer fresh = load_tiny(folder);
        const ForwardInputs in = read_forward_inputs(*open_forward_case(name));
        const ForwardGeometry g = resolve_forward_geometry(in, fresh.config());
        fresh.forward(in, {mode, mode, dtype});
        const std::array<int64_t, 1> prompt{g.und_len};
        EXPECT_EQ(fresh.workspace_bytes(),
                  estimate_workspace_bytes(fresh.config(), prompt, g.grid, g.noisy_tokens(), dtype))
            << folder << " " << name << " " << activation_dtype_name(dtype);
      }
    }
  }
}

// One forward per prompt: each slot at the larger of the two; the rotary
// tables of both prompts stay cached.
TEST(DeviceMemoryEstimate, TwoPromptsTakeTheLargerOfEachSlot) {
  Cosmos3Transformer model = load_tiny("transformer");
  ForwardInputs cond = read_forward_inputs(*open_forward_case("video"));
  ForwardInputs shorter = cond;
  // The same latent behind a prompt two tokens shorter.
  const ForwardGeometry g = resolve_forward_geometry(cond, model.config());
  const int64_t L = g.und_len, S = g.sequence_length;
  shorter.input_ids.resize(std::size_t(L - 2));
  std::vector<float> positions;
  for (int64_t axis = 0; axis < 3; ++axis) {
    const auto row = cond.position_ids.begin() + axis * S;
    positions.insert(positions.end(), row, row + L - 2);
    positions.insert(positions.end(), row + L, row + S);
  }
  shorter.position_ids = positions;
  model.forward(shorter, {Precision::BF16, Precision::BF16, ActivationDType::BF16});
  model.forward(cond, {Precision::BF16, Precision::BF16, ActivationDType::BF16});
  const std::array<int64_t, 2> prompts{L - 2, L};
  EXPECT_EQ(model.workspace_bytes(),
            estimate_workspace_bytes(model.config(), prompts, g.grid, g.noisy_tokens(), ActivationDType::BF16));
}

// CFG batching (forward_batch on the host, forward_resident with two samples
// in the device loop): both passes' rows in the slots at once.
TEST(DeviceMemoryEstimate, BatchedPassesHoldBothPassesActivationsAtOnce) {
  for (ActivationDType dtype : {ActivationDType::F32, ActivationDType::BF16}) {
    Cosmos3Transformer model = load_tiny("transformer-fp8");
    const ForwardInputs cond = read_forward_inputs(*open_forward_case("video")), uncond = shorter_prompt(cond);
    const ForwardGeometry g = resolve_forward_geometry(cond, model.config());
    const ForwardInputs* both[2] = {&cond, &uncond};
    model.forward_batch(both, {Precision::W8A8, Precision::W8A8, dtype});
    const std::array<int64_t, 2> prompts{int64_t(cond.input_ids.size()), int64_t(uncond.input_ids.size())};
    const std::size_t batched =
        estimate_workspace_bytes(model.config(), prompts, g.grid, g.noisy_tokens(), dtype, true);
    EXPECT_EQ(model.workspace_bytes(), batched) << activation_dtype_name(dtype);
    EXPECT_GT(batched, estimate_workspace_bytes(model.config(), prompts, g.grid, g.noisy_tokens(), dtype, false));
    const DeviceMemoryEstimate one_at_a_time =
        estimate_run_memory(model, prompts, g.grid, g.noisy_tokens(), dtype, 8, false);
    const DeviceMemoryEstimate in_one = estimate_run_memory(model, prompts, g.grid, g.noisy_tokens(), dtype, 8, true);
    EXPECT_GT(in_one.scratch, one_at_a_time.scratch);
    EXPECT_EQ(in_one.weights, one_at_a_time.weights);
    EXPECT_EQ(in_one.understanding_kv, one_at_a_time.understanding_kv);
  }
}

TEST(DeviceMemoryEstimate, WeightsAndCachesAddUpFromTheCheckpointAndThePrompts) {
  Cosmos3Transformer plain = load_tiny("transformer-fp8");
  Cosmos3Transformer cached = load_tiny("transformer-fp8", WeightCache::All);
  const ForwardInputs in = read_forward_inputs(*open_forward_case("image"));
  const PatchGrid grid = grid_of(in, plain.config());
  const std::array<int64_t, 2> prompts{20, 12};
  const DeviceMemoryEstimate a = estimate_run_memory(plain, prompts, grid, grid.tokens(), ActivationDType::BF16);
  const DeviceMemoryEstimate b = estimate_run_memory(cached, prompts, grid, grid.tokens(), ActivationDType::BF16);
  int64_t governed_parameters = 0;
  plain.for_each_governed_linear([&](Linear& l) { governed_parameters += l.out_features() * l.in_features(); });
  // The bf16 Ŵ copies, 2 bytes per governed parameter; no transient decode buffer then.
  EXPECT_EQ(b.weights - a.weights, std::size_t(2 * governed_parameters));
  EXPECT_LT(b.scratch, a.scratch);
  const Cosmos3Config& c = plain.config();
  EXPECT_EQ(a.understanding_kv, std::size_t(c.num_hidden_layers * 2 * (20 + 12) * c.kv_width() * 2));
  EXPECT_GT(a.weights, std::size_t(governed_parameters)) << "1 byte per FP8 parameter, plus the rest";
  EXPECT_EQ(a.total(), a.weights + a.understanding_kv + a.scratch);
  // A denoising loop's latent-sized buffers (float32) are scratch too.
  const DeviceMemoryEstimate loop = estimate_run_memory(plain, prompts, grid, grid.tokens(), ActivationDType::BF16, 8);
  EXPECT_EQ(loop.scratch - a.scratch,
            std::size_t(8 * 4 * grid.channels * grid.frames * grid.height * grid.width));
  EXPECT_EQ(loop.weights, a.weights);
  // The CPU checks nothing.
  require_run_memory(plain, prompts, PatchGrid{4, 1 << 20, 1 << 20, 1 << 20, 2}, 0, ActivationDType::BF16, "cpu");
}

}  // namespace
}  // namespace stepmix::test
