#include "model/memory_estimate.hpp"

#include <algorithm>
#include <array>

#include "kernels/cuda/cuda_kernels.hpp"
#include "model/workspace.hpp"

namespace stepmix {
namespace {

// The cuBLASLt workspace of the CUDA backend's GEMM runner.
constexpr std::size_t kGemmWorkspaceBytes = cuda::GemmRunner::kDefaultWorkspaceBytes;

std::size_t bytes_of(int64_t count, std::size_t element) { return std::size_t(count) * element; }

// A Linear's weight and bias as stored: its device copy.
std::size_t stored_bytes(const Linear& l) { return l.weight().nbytes + (l.bias() ? l.bias()->nbytes : 0); }

}  // namespace

std::size_t estimate_workspace_bytes(const Cosmos3Config& c, std::span<const int64_t> und_lengths,
                                     const PatchGrid& grid, int64_t noisy_tokens, ActivationDType activations,
                                     bool batched) {
  // Each slot ends at the largest request of any call (ForwardWorkspace
  // grows to fit and never shrinks); the requests are those of
  // forward_pass.cpp, slot by slot. The calls are one per prompt, or one
  // for all prompts when batched (a batch asks at least as much of every
  // slot as any of its samples alone).
  const bool bf16 = activations == ActivationDType::BF16;
  const std::size_t t = bf16 ? 2 : 4, f = 4;
  const int64_t E = c.hidden_size, I = c.intermediate_size, D = c.head_dim, Q = c.q_width(), KV = c.kv_width();
  const int64_t Nv = grid.tokens(), Nn = noisy_tokens, F = grid.features();
  std::array<std::size_t, std::size_t(Slot::count)> slot{};
  const auto need = [&](Slot s, std::size_t bytes) { slot[std::size_t(s)] = std::max(slot[std::size_t(s)], bytes); };
  const auto call = [&](std::span<const int64_t> prompts) {
    const int64_t n = int64_t(prompts.size()), R = n * Nv, noisy = n * Nn;
    int64_t longest = 0, kv_rows = 0;
    for (const int64_t L : prompts) {
      longest = std::max(longest, L);
      kv_rows += L + Nv;
    }
    const int64_t rows = std::max(longest, R);
    need(Slot::und, bytes_of(longest * E, f));
    need(Slot::residual, bytes_of(R * E, f));
    need(Slot::normed, bytes_of(rows * E, t));
    need(Slot::q, bytes_of(rows * Q, t));
    need(Slot::keys, bytes_of(kv_rows * KV, t));
    need(Slot::values, bytes_of(kv_rows * KV, t));
    if (n > 1) {
      need(Slot::gen_keys, bytes_of(R * KV, t));
      need(Slot::gen_values, bytes_of(R * KV, t));
    }
    if (c.has_und_k_norm_for_gen()) need(Slot::own_keys, bytes_of(longest * KV, t));
    need(Slot::attended, bytes_of(std::max(rows * Q, noisy * E), t));
    need(Slot::projected, bytes_of(rows * E, t));
    need(Slot::up, bytes_of(rows * I, t));
    if (c.has_gate_proj()) need(Slot::gate, bytes_of(rows * I, t));
    need(Slot::patches, bytes_of(R * F, f));
    if (Nn > 0) {  // one timestep per call, as the pipeline passes it: one row of the MLP
      need(Slot::time_sinusoid, bytes_of(kTimestepChannels, f));
      need(Slot::time_hidden, bytes_of(E, f));
      need(Slot::embedding, bytes_of(E, f));
    }
    need(Slot::output, bytes_of(noisy * F, f));
    if (bf16) {  // the bf16 latent and the bf16 read-out reuse slots
      need(Slot::normed, bytes_of(R * F, t));
      need(Slot::projected, bytes_of(std::max(R * E, noisy * F), t));
    }
  };
  if (batched) {
    call(und_lengths);
  } else {
    for (std::size_t i = 0; i < und_lengths.size(); ++i) call(und_lengths.subspan(i, 1));
  }
  std::size_t total = 0;
  for (std::size_t bytes : slot) total += bytes;
  // The rotary tables of every prompt stay cached (model/rope_cache.hpp):
  // [2, L + Nv, D] float32 each (at most: prompts with the same position ids
  // share theirs).
  for (const int64_t L : und_lengths) total += bytes_of(2 * (L + Nv) * D, f);
  return total;
}

DeviceMemoryEstimate estimate_run_memory(const Cosmos3Transformer& transformer, std::span<const int64_t> und_lengths,
                                   const PatchGrid& grid, int64_t noisy_tokens, ActivationDType activations,
                                   int64_t latent_buffers, bool batched) {
  const Cosmos3Config& c = transformer.config();
  const std::size_t t = activations == ActivationDType::BF16 ? 2 : 4;
  const int64_t E = c.hidden_size, D = c.head_dim;
  DeviceMemoryEstimate e;
  const int64_t longest = und_lengths.empty() ? 0 : *std::max_element(und_lengths.begin(), und_lengths.end());
  // The most rows one product multiplies.
  const int64_t rows = std::max(longest, (batched ? int64_t(und_lengths.size()) : 1) * grid.tokens());

  int64_t max_in = 0, max_weight = 0;
  std::size_t f32_bias_scratch = 0;
  const auto f32_bias = [&](const Linear& l) {
    if (l.bias() && l.bias()->dtype == DType::F32)
      f32_bias_scratch = std::max(f32_bias_scratch, cuda::GemmRunner::f32_bias_scratch_bytes(rows, l.out_features()));
  };
  bool uncached_fp8 = false;
  transformer.for_each_governed_linear([&](const Linear& l) {
    e.weights += stored_bytes(l);
    f32_bias(l);
    if (l.is_fp8()) {
      e.weights += 2 * sizeof(float);
      if (l.weight_cache() == WeightCache::All) e.weights += bytes_of(l.out_features() * l.in_features(), 2);
      uncached_fp8 |= l.weight_cache() != WeightCache::All;
      max_in = std::max(max_in, l.in_features());
      max_weight = std::max(max_weight, l.out_features() * l.in_features());
    }
  });
  // The other Linears: proj_in, proj_out and the timestep MLP's two.
  const Cosmos3Weights& w = transformer.weights();
  for (const Linear* l : {&w.proj_in, &w.proj_out, &w.time_linear_1, &w.time_linear_2}) e.weights += stored_bytes(*l);
  // (The timestep MLP's float32 rows take their own kernel, no scratch.)
  f32_bias(w.proj_in);
  f32_bias(w.proj_out);
  // Norm weights as float32: four [E] and up to five [D] per layer, two [E].
  e.weights += bytes_of(c.num_hidden_layers * (4 * E + 5 * D) + 2 * E, 4);

  for (const int64_t L : und_lengths) e.understanding_kv += bytes_of(c.num_hidden_layers * 2 * L * c.kv_width(), t);

  e.scratch =
      estimate_workspace_bytes(c, und_lengths, grid, noisy_tokens, activations, batched) + kGemmWorkspaceBytes;
  e.scratch += bytes_of(rows * max_in, 1);               // E4M3 activation codes
  if (uncached_fp8) e.scratch += bytes_of(max_weight, 2);  // one transient bf16 Ŵ
  e.scratch += bytes_of(latent_buffers * grid.channels * grid.frames * grid.height * grid.width, 4);
  e.scratch += f32_bias_scratch;  // one scratch, grown to the largest
  return e;
}

void require_run_memory(Cosmos3Transformer& transformer, std::span<const int64_t> und_lengths, const PatchGrid& grid,
                        int64_t noisy_tokens, ActivationDType activations, const std::string& what,
                        int64_t latent_buffers, bool batched) {
  if (transformer.backend().device() == Device::Cpu) return;
  transformer.backend().require_memory(
      estimate_run_memory(transformer, und_lengths, grid, noisy_tokens, activations, latent_buffers, batched), what);
}

}  // namespace stepmix
