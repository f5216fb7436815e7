// Discovery of the governed Linears of a Cosmos3 transformer from tensor
// names and dtypes, with the load-time
// validation of every FP8 Linear (docs/step-policy.md §8.3).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "io/checkpoint.hpp"
#include "stepmix/policy.hpp"

namespace stepmix {

struct GovernedLinear {
  std::string module;        // e.g. "layers.0.self_attn.add_q_proj"
  Tower tower;
  bool fp8 = false;          // F8_E4M3 weight + scalar scales; else 16-bit
  const TensorView* weight = nullptr;
  float weight_scale = 0;    // s_w (FP8 only)
  float input_scale = 0;     // s_x (FP8 only)
};

struct GovernedDiscovery {
  std::vector<GovernedLinear> linears;  // sorted by module name
  GovernedCounts counts;
  // Tensors stored in 16-bit that are not governed weights (embeddings,
  // norms, proj_in/out, time embedder, lm_head, ...).
  std::vector<std::string> kept_16bit;
  bool has_fp8() const { return counts.generation_fp8 + counts.reasoner_fp8 > 0; }
};

// Scans every tensor. Throws stepmix::Error naming the tensor when an FP8
// weight is not 2-D, lacks a scale, has a scale that is not one finite
// positive F32 element, carries SmoothQuant/NVFP4-style extras
// (.pre_quant_scale, .weight_scale_2, .input_scale_2, .alpha), uses the
// quantizer-state naming (weight_quantizer._amax), sits on a module stepmix
// does not govern, or when a scale has no FP8 weight.
GovernedDiscovery discover_governed_linears(const TensorStore& store);

// A SmoothQuant/NVFP4 scale (.pre_quant_scale, .weight_scale_2,
// .input_scale_2, .alpha): the loader names it as such among the tensors no
// module reads.
bool is_foreign_scale_name(std::string_view name);

}  // namespace stepmix
