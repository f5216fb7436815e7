// The tensors of a Cosmos3 transformer checkpoint (docs/design.md, "The
// checkpoint"), bound to the layers that use them. Linear
// weights stay memory-mapped views; only the small norm vectors are widened
// to float32. lm_head is accepted (shape-checked) but never read; any other
// tensor the model does not bind is an error.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "model/config.hpp"
#include "quant/linear.hpp"
#include "stepmix/policy.hpp"

namespace stepmix {

struct AttentionWeights {
  // Understanding stream (reasoner tower).
  Linear to_q, to_k, to_v, to_out;
  // Generation stream (generation tower).
  Linear add_q_proj, add_k_proj, add_v_proj, to_add_out;
  std::vector<float> norm_q, norm_k;              // [D]; empty when !qk_norm_for_text
  std::vector<float> k_norm_und_for_gen;          // [D]; empty unless has_und_k_norm_for_gen()
  std::vector<float> norm_added_q, norm_added_k;  // [D]
};

struct MlpWeights {
  std::optional<Linear> gate_proj;  // silu only
  Linear up_proj, down_proj;
};

struct DecoderLayerWeights {
  std::vector<float> input_layernorm, input_layernorm_moe_gen;                    // [E]
  std::vector<float> post_attention_layernorm, post_attention_layernorm_moe_gen;  // [E]
  AttentionWeights attention;
  MlpWeights mlp, mlp_moe_gen;
};

struct Cosmos3Weights {
  TensorView embed_tokens;  // [vocab, E], BF16 or F32, mapped
  std::vector<DecoderLayerWeights> layers;
  std::vector<float> norm, norm_moe_gen;  // [E]
  Linear proj_in;                         // [E, p²C] + bias
  Linear proj_out;                        // [p²C, E] + bias
  Linear time_linear_1;                   // [E, 256] + bias
  Linear time_linear_2;                   // [E, E] + bias
  GovernedCounts governed;                // per tower, FP8 vs 16-bit
  std::vector<std::string> fp8_modules;   // the governed Linears stored F8_E4M3, in load order
  // Keeps the mapped files alive as long as the views above.
  std::vector<std::shared_ptr<const SafetensorsFile>> files;

  bool has_fp8() const { return governed.generation_fp8 + governed.reasoner_fp8 > 0; }
};

// Binds every tensor the vision forward needs; throws stepmix::Error
// ("model") naming the tensor and the expected and actual shape or dtype.
// Governed Linears may be F8_E4M3 (with scalar F32 weight_scale/input_scale
// within quant/scale_bounds.hpp) or 16/32-bit; everything else must be BF16
// or F32. A tensor left unbound (beyond num_hidden_layers, an unknown name, a
// sound/action head) is an error listing the first five and the count.
Cosmos3Weights load_cosmos3_weights(const TensorStore& store, const Cosmos3Config& config, WeightCache cache,
                                    W8A16Rounding rounding = W8A16Rounding::Single);

}  // namespace stepmix
