// Cosmos3OmniTransformer forward for text-to-image / text-to-video
// generation on the CPU (shared spec cosmos3-transformer.md), with float32 or
// bf16 activations (ActivationDType) and the governed Linears of each tower
// running Dense (BF16 checkpoint), W8A16 or W8A8 (ModelOpt FP8 checkpoint)
// per call.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "model/activation_dtype.hpp"
#include "model/config.hpp"
#include "model/forward_inputs.hpp"
#include "model/pointwise.hpp"
#include "model/rope.hpp"
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

class Cosmos3Transformer {
 public:
  // MODEL_DIR or a transformer folder: config.json + (sharded) safetensors.
  static Cosmos3Transformer load(const ModelDirectory& dir, WeightCache cache = WeightCache::None);
  static Cosmos3Transformer load(const TensorStore& store, const nlohmann::json& config, const std::string& config_path,
                                 WeightCache cache = WeightCache::None);

  const Cosmos3Config& config() const { return config_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  const GovernedCounts& governed_counts() const { return weights_.governed; }
  bool has_fp8() const { return weights_.has_fp8(); }

  // One call: velocity [1, C, T, H, W], zero at conditioning frames.
  // generation_mode drives add_{q,k,v}_proj, to_add_out and mlp_moe_gen.*;
  // reasoner_mode drives to_{q,k,v,out} and mlp.*. A tower holding FP8
  // Linears needs W8A16 or W8A8; 16-bit Linears run dense whatever the mode.
  // With `debug`, the understanding stream is recomputed (not read from the
  // cache) so that its hidden states can be recorded.
  // One forward at a time per instance: calls share the scratch buffers.
  HostTensor forward(const ForwardInputs& inputs, LinearMode generation_mode, LinearMode reasoner_mode,
                     ForwardDebug* debug = nullptr);

  // Activations handed to the Linears (default F32, which the goldens pin
  // down bit for bit). Applies from the next forward; cached understanding
  // K/V are keyed by it, so switching never reuses the other dtype's.
  void set_activation_dtype(ActivationDType dtype) { activation_dtype_ = dtype; }
  ActivationDType activation_dtype() const { return activation_dtype_; }
  // Bytes held by the reusable forward scratch (grows to the largest call).
  std::size_t workspace_bytes() const { return workspace_.bytes(); }

  // W8A8 test hook on every governed Linear (forced-code conformance).
  void set_activation_code_hook(const ActivationCodeHook& hook);
  // Visits the governed Linears (both towers, every layer), e.g. to attach
  // calibration observers.
  void for_each_governed_linear(const std::function<void(Linear&)>& fn);

  // Understanding-stream K/V cache (default: 2 prompts). 0 disables it, so
  // every call runs the reasoner Linears (and their code hooks).
  UnderstandingCache& understanding_cache() { return understanding_cache_; }

 private:
  Cosmos3Transformer(Cosmos3Config config, std::vector<std::string> warnings, Cosmos3Weights weights);

  std::shared_ptr<const UnderstandingKV> understanding(const ForwardInputs& inputs, const ForwardGeometry& geometry,
                                                       const RopeTables& rope, LinearMode mode, ForwardDebug* debug);
  void check_tower_mode(const char* tower, int fp8_linears, LinearMode mode) const;
  // Patchify → proj_in, + timestep embedding on noisy frames, into
  // workspace_.residual: [Nv, E]. Records vision_proj_in, timestep_embed.
  float* embed_vision(const ForwardInputs& inputs, const ForwardGeometry& geometry, ForwardDebug* debug);
  // Text rows: token embedding into a new [L, E] float32 residual.
  std::vector<float> embed_text(const ForwardInputs& inputs) const;
  // gen_final_norm → noisy rows → proj_out: packed [Nn, p²C] float32.
  std::vector<float> read_out(const float* gen, const ForwardGeometry& geometry, ForwardDebug* debug);

  // Float32 activations (transformer_layers_f32.cpp).
  std::shared_ptr<const UnderstandingKV> run_understanding_f32(const ForwardInputs& inputs, const RopeTables& rope,
                                                               LinearMode mode, ForwardDebug* debug);
  void generation_layer_f32(int64_t layer, float* gen, const UnderstandingLayerKV& und_kv, const RopeTables& rope,
                            const ForwardGeometry& geometry, LinearMode mode);
  void mlp_f32(const MlpWeights& w, const float* x, int64_t rows, float* out, LinearMode mode);

  // Bf16 activations (transformer_layers_bf16.cpp).
  std::shared_ptr<const UnderstandingKV> run_understanding_bf16(const ForwardInputs& inputs, const RopeTables& rope,
                                                                LinearMode mode, ForwardDebug* debug);
  void generation_layer_bf16(int64_t layer, float* gen, const UnderstandingLayerKV& und_kv, const RopeTables& rope,
                             const ForwardGeometry& geometry, LinearMode mode);
  void mlp_bf16(const MlpWeights& w, const uint16_t* x, int64_t rows, uint16_t* out, LinearMode mode);

  Cosmos3Config config_;
  std::vector<std::string> warnings_;
  Cosmos3Weights weights_;
  NormKind norm_kind_;
  UnderstandingCache understanding_cache_;
  ActivationDType activation_dtype_ = ActivationDType::F32;
  ForwardWorkspace workspace_;
};

}  // namespace stepmix
