// The backend memory a run of transformer forwards needs, for the up-front
// "does it fit" check of a backend with memory of its own (--device cuda):
// refused before the first forward rather than failing in the middle of a
// generation.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.hpp"
#include "core/vision_tokens.hpp"
#include "model/transformer.hpp"

namespace stepmix {

// Forwards over one latent `grid` with `noisy_tokens` of its tokens noisy,
// for prompts of `und_lengths` tokens (each prompt's K/V and rotary tables
// stay cached, as the understanding and rope caches keep the conditional and
// unconditional prompts of a CFG run), with `activations`, one forward per
// prompt or, `batched`, all prompts in one forward (CFG batching: two
// passes' rows in every slot):
//   weights           device copies of every Linear the backend runs (the
//                     governed ones at their stored size, plus the bf16 Ŵ of
//                     WeightCache::All, proj_in, proj_out) and of the norm
//                     weights;
//   understanding_kv  layers × 2 × L × Hkv·D activations per prompt;
//   scratch           the forward's workspace slots, sized as
//                     model/forward_pass.cpp asks for them (the largest call
//                     of the run), the cached rotary tables, plus what the
//                     CUDA backend's Linears
//                     allocate: E4M3 activation codes [rows, in], one
//                     transient bf16 Ŵ (FP8 checkpoints without the weight
//                     cache), the cuBLASLt workspace, and `latent_buffers`
//                     float32 buffers of the latent's size the caller holds
//                     (a denoising loop on the backend: denoise.hpp).
// Not counted: the CUDA context and cuBLASLt's own allocations, outside what
// cudaMemGetInfo reports as free once the backend is up.
DeviceMemoryEstimate estimate_run_memory(const Cosmos3Transformer& transformer, std::span<const int64_t> und_lengths,
                                   const PatchGrid& grid, int64_t noisy_tokens, ActivationDType activations,
                                   int64_t latent_buffers = 0, bool batched = false);

// The forward workspace part of the estimate alone, rotary tables included
// (what Cosmos3Transformer::workspace_bytes() reaches after the run's
// forwards).
std::size_t estimate_workspace_bytes(const Cosmos3Config& config, std::span<const int64_t> und_lengths,
                                     const PatchGrid& grid, int64_t noisy_tokens, ActivationDType activations,
                                     bool batched = false);

// estimate_run_memory checked by the transformer's backend (nothing on the
// CPU); `what` names the request in the refusal.
void require_run_memory(Cosmos3Transformer& transformer, std::span<const int64_t> und_lengths, const PatchGrid& grid,
                        int64_t noisy_tokens, ActivationDType activations, const std::string& what,
                        int64_t latent_buffers = 0, bool batched = false);

}  // namespace stepmix
