// Seeded random Cosmos3 transformer checkpoints and inputs, for benchmarks and
// for tests that need sizes the tiny goldens do not have (head_dim 128, many
// tokens, Cosmos3-Nano width). Not a model: the weights are uniform noise
// scaled like a trained network's (unit-gain norms, 1/sqrt(fan_in)
// projections), so activations stay in a realistic range and W8A8
// quantization neither saturates nor underflows wholesale.
//
// Every tensor draws from its own counter-based stream (seed, tensor name,
// element index), so a tensor's values do not depend on which other tensors
// the checkpoint holds: the first 4 layers of a 36-layer checkpoint equal a
// 4-layer one of the same seed, and tensors can be generated in parallel.
#pragma once

#include <cstdint>
#include <functional>
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

// Benchmark shapes: head_dim 128, GQA 4:1, intermediate 3·hidden, 48 latent
// channels, patch 2. hidden 4096 is Cosmos3-Nano's width (32 query / 8 KV
// heads, FFN 12288); Nano has 36 layers.
SyntheticModelShape benchmark_shape(int64_t hidden, int64_t layers);

// One layer of width 32 (2 query heads of 16, one KV head, FFN 64), a
// vocabulary of 16: with 48 channels and seed 3, tests/data/vae-model's.
SyntheticModelShape tiny_shape(int64_t latent_channel);

// config.json of a silu Cosmos3 model of this shape (rope_axes_dim chosen to
// fill head_dim/2 slots, 3·H and 3·W slots within it). With fp8, the ModelOpt
// quantization_config of a serialised FP8 build, with the first-3/last-3
// W8A16 step policy of the embedded model.
nlohmann::json synthetic_config(const SyntheticModelShape& shape, bool fp8);

struct SyntheticWriteOptions {
  bool fp8 = false;
  uint64_t seed = 1;
  // One safetensors shard per decoder layer (+ one for the rest) and a
  // diffusion_pytorch_model.safetensors.index.json, as large Diffusers
  // checkpoints are stored; otherwise one diffusion_pytorch_model.safetensors.
  bool shard_per_layer = false;
  // Called after each shard is written ("shard 3/37"), e.g. for progress.
  std::function<void(const std::string&)> progress;
};

// Writes `folder`/config.json and the weights. BF16: every tensor BF16.
// FP8: the same BF16 weights, each governed Linear quantized tensorwise
// (weight_scale = amax/448, E4M3 codes by clamp-then-RNE) with a fixed
// input_scale of 8/448; so both folders written with one seed describe the
// same network. Written tensor by tensor into each shard (at most one tensor's
// values in memory, ~2 bytes per element of the largest matrix): a 36-layer
// Nano-width FP8 checkpoint (~14.5 GB) is written without holding it.
void write_synthetic_transformer(const std::string& folder, const SyntheticModelShape& shape,
                                 const SyntheticWriteOptions& options);
void write_synthetic_transformer(const std::string& folder, const SyntheticModelShape& shape, bool fp8,
                                 uint64_t seed);

// Bytes the weights of such a checkpoint take on disk (tensor data; headers
// and config add a few kilobytes).
int64_t synthetic_checkpoint_bytes(const SyntheticModelShape& shape, bool fp8);

// One text-to-image call: `text_tokens` random ids, a [1, C, 1, H, W] latent
// of N(0,1)-like noise, one timestep for all tokens, position ids as the
// pipeline builds them for one frame (text (i,i,i), vision (L+15000, h, w)).
ForwardInputs synthetic_inputs(const SyntheticModelShape& shape, int64_t text_tokens, int64_t latent_height,
                               int64_t latent_width, float timestep, uint64_t seed);

// Writes inputs in the golden / `stepmix forward --inputs` layout.
void write_forward_inputs(const std::string& path, const ForwardInputs& inputs);

}  // namespace stepmix
