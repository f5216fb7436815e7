// Seeded random Cosmos3 transformer checkpoints and inputs, for benchmarks and
// for tests that need sizes the tiny goldens do not have (head_dim 128, many
// tokens). Not a model: the weights are uniform noise scaled like a trained
// network's (unit-gain norms, 1/sqrt(fan_in) projections), so activations stay
// in a realistic range and W8A8 quantization neither saturates nor underflows
// wholesale.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "model/forward_inputs.hpp"

namespace stepmix {

struct SyntheticModelShape {
  int64_t hidden_size = 1024;
  int64_t intermediate_size = 3072;
  int64_t layers = 4;
  int64_t heads = 8;
  int64_t kv_heads = 2;
  int64_t head_dim = 128;
  int64_t vocab_size = 1024;
  int64_t latent_channel = 48;
  int64_t patch = 2;
};

// config.json of a silu Cosmos3 model of this shape (rope_axes_dim chosen to
// fill head_dim/2 slots, 3·H and 3·W slots within it). With fp8, the ModelOpt
// quantization_config of a serialised FP8 build.
nlohmann::json synthetic_config(const SyntheticModelShape& shape, bool fp8);

// Writes `folder`/config.json and `folder`/diffusion_pytorch_model.safetensors.
// BF16: every tensor BF16 except the FP32 time embedder. FP8: the same BF16
// weights, each governed Linear quantized tensorwise (weight_scale =
// amax/448, E4M3 codes by clamp-then-RNE) with a fixed input_scale of 8/448;
// so both folders written with one seed describe the same network.
void write_synthetic_transformer(const std::string& folder, const SyntheticModelShape& shape, bool fp8,
                                 uint64_t seed);

// One text-to-image call: `text_tokens` random ids, a [1, C, 1, H, W] latent
// of N(0,1)-like noise, one timestep for all tokens, position ids as the
// pipeline builds them for one frame (text (i,i,i), vision (L+15000, h, w)).
ForwardInputs synthetic_inputs(const SyntheticModelShape& shape, int64_t text_tokens, int64_t latent_height,
                               int64_t latent_width, float timestep, uint64_t seed);

// Writes inputs in the golden / `stepmix forward --inputs` layout.
void write_forward_inputs(const std::string& path, const ForwardInputs& inputs);

}  // namespace stepmix
