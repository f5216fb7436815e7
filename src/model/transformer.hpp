// Cosmos3OmniTransformer forward for text-to-image / text-to-video
// generation, written once against the Backend seam (src/backend/): the
// governed Linears of each tower run at the precision of the call (BF16 =
// dense for 16-bit checkpoints, W8A16 or W8A8 for ModelOpt FP8 ones), with
// float32 or bf16 activations.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "io/checkpoint.hpp"
#include "model/config.hpp"
#include "model/forward_inputs.hpp"
#include "model/rope.hpp"
#include "model/rope_cache.hpp"
#include "model/understanding_cache.hpp"
#include "model/weights.hpp"
#include "model/workspace.hpp"

namespace stepmix {

// Intermediate tensors of one call, under the golden file names:
// rope.inv_freq, rope.cos, rope.sin, und_embed, vision_proj_in,
// timestep_embed, gen_embed, und_hidden.{k}, gen_hidden.{k},
// gen_final_norm, packed_pred.
struct ForwardDebug {
  std::map<std::string, HostTensor> tensors;

  void record(const std::string& name, std::vector<int64_t> shape, const float* data);
};

// What one call runs: the precision of each tower and the activation dtype.
// generation drives add_{q,k,v}_proj, to_add_out and mlp_moe_gen.*; reasoner
// drives to_{q,k,v,out} and mlp.*. A tower holding FP8 Linears needs W8A16 or
// W8A8; 16-bit Linears run dense whatever is asked. With `debug`, the
// understanding stream is recomputed (not read from the cache) so that its
// hidden states can be recorded.
struct ForwardOptions {
  Precision generation = Precision::W8A8;
  Precision reasoner = Precision::W8A8;
  ActivationDType activations = ActivationDType::F32;
  ForwardDebug* debug = nullptr;
};

class Cosmos3Transformer {
 public:
  // MODEL_DIR or a transformer folder: config.json + (sharded) safetensors.
  static Cosmos3Transformer load(const ModelDirectory& dir, WeightCache cache = WeightCache::None,
                                 Backend& backend = cpu_backend());
  static Cosmos3Transformer load(const TensorStore& store, const nlohmann::json& config, const std::string& config_path,
                                 WeightCache cache = WeightCache::None, Backend& backend = cpu_backend(),
                                 W8A16Rounding rounding = W8A16Rounding::Single);

  const Cosmos3Config& config() const { return config_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  const GovernedCounts& governed_counts() const { return weights_.governed; }
  bool has_fp8() const { return weights_.has_fp8(); }
  const Cosmos3Weights& weights() const { return weights_; }
  Backend& backend() const { return *backend_; }

  // One call: velocity [1, C, T, H, W], zero at conditioning frames.
  // One forward at a time per instance: calls share the scratch buffers.
  HostTensor forward(const ForwardInputs& inputs, const ForwardOptions& options);
  // The same call with the latent in backend memory: latent and velocity
  // [C, T, H, W] float32 buffers of backend(); inputs.latent gives the shape
  // only (its data is not read). Nothing crosses to the host but debug
  // records, so a denoising loop keeps its latent on the backend.
  void forward_resident(const ForwardInputs& inputs, const float* latent, float* velocity,
                        const ForwardOptions& options);
  // Several samples over the one latent in backend memory (CFG: both passes
  // of a step in one forward, as forward_batch): inputs[i] writes its
  // velocity to velocities[i], a buffer of its own. Gives, bit for bit, what
  // forward_resident of each sample alone gives. The inputs must share the
  // latent shape.
  void forward_resident(std::span<const ForwardInputs* const> inputs, const float* latent,
                        std::span<float* const> velocities, const ForwardOptions& options);
  // Several samples in one call (CFG: the conditional and unconditional pass
  // of a step): their vision rows are stacked through every Linear, so each
  // weight is read once, while attention stays per sample with its own
  // understanding K/V. Returns, bit for bit, forward(*inputs[i]) for each i.
  // The samples must share the patch size and latent channels; no debug
  // records (use forward()).
  std::vector<HostTensor> forward_batch(std::span<const ForwardInputs* const> inputs, const ForwardOptions& options);

  // Bytes held by the reusable forward scratch (grows to the largest call)
  // and the rotary tables kept for the next call.
  std::size_t workspace_bytes() const { return workspace_.bytes() + rope_cache_.bytes(); }

  // W8A8 test hook on every governed Linear (forced-code conformance).
  void set_activation_code_hook(const ActivationCodeHook& hook);
  // A hook is set: it expects the codes of one pass per call, so the
  // denoising loop runs CFG passes one at a time.
  bool has_activation_code_hook() const { return has_code_hook_; }
  // Visits the governed Linears (both towers, every layer), e.g. to attach
  // calibration observers.
  void for_each_governed_linear(const std::function<void(Linear&)>& fn);
  void for_each_governed_linear(const std::function<void(const Linear&)>& fn) const;
  // Refuses up front what the backend cannot run of `plan`: each governed
  // Linear at every precision its tower takes in the plan (the reasoner's,
  // or each step's generation precision).
  void require_runnable(const StepPlan& plan) const;
  // Bytes the Linears own beyond the mapped checkpoint (the weight cache).
  std::size_t weight_cache_bytes() const;

  // Understanding-stream K/V cache (default: 2 prompts). 0 disables it, so
  // every call runs the reasoner Linears (and their code hooks).
  UnderstandingCache& understanding_cache() { return understanding_cache_; }
  // The rotary cos/sin tables of the last samples (default: 2), in backend
  // memory, so the steps of a denoising loop build and upload them once.
  RopeCache& rope_cache() { return rope_cache_; }

 private:
  Cosmos3Transformer(Cosmos3Config config, std::vector<std::string> warnings, Cosmos3Weights weights,
                     Backend& backend);
  void check_tower_precision(const char* tower, int fp8_linears, Precision precision) const;

  Cosmos3Config config_;
  std::vector<std::string> warnings_;
  Cosmos3Weights weights_;
  Backend* backend_;
  UnderstandingCache understanding_cache_;
  RopeCache rope_cache_;
  ForwardWorkspace workspace_;
  bool has_code_hook_ = false;
};

}  // namespace stepmix
