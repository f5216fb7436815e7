// Inputs of one Cosmos3 transformer call for vision generation, their
// validation, and the safetensors layout
// the goldens and `stepmix forward --inputs` use.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/embedding.hpp"

namespace stepmix {

class SafetensorsFile;

// A float32 tensor owned by the host.
struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// One sample. The text occupies joint-sequence rows [0, L) (L = und_len =
// input_ids.size()), the vision tokens rows [L, S). Position ids already
// carry the fps modulation (the pipeline builds them).
struct ForwardInputs {
  std::vector<int64_t> input_ids;   // [L]
  std::vector<float> position_ids;  // [3, S]: T, H, W rows
  HostTensor latent;                // [1, C, T, H, W]
  // Scheduler timestep per noisy vision token [Nn], or one value for all.
  std::vector<float> timesteps;
  // [T]: 1 = conditioning (clean) frame, 0 = noisy; empty = every frame noisy.
  std::vector<int64_t> condition_frame_mask;
};

// What a call works on, derived from the inputs and checked against the config.
struct ForwardGeometry {
  int64_t und_len = 0;  // L
  PatchGrid grid;
  int64_t sequence_length = 0;         // S = L + Nv
  std::vector<int64_t> noisy_frames;   // ascending
  std::vector<float> noisy_timesteps;  // [Nn], one per noisy token

  int64_t vision_tokens() const { return grid.tokens(); }
  int64_t noisy_tokens() const { return int64_t(noisy_frames.size()) * grid.tokens_per_frame(); }
};

// Throws stepmix::Error ("model") naming the input, its shape and what the
// config requires (latent channels, position-id columns, token-id range, ...).
// With latent_elsewhere the latent's values live in backend memory
// (Cosmos3Transformer::forward_resident): only its shape is read.
ForwardGeometry resolve_forward_geometry(const ForwardInputs& inputs, const Cosmos3Config& config,
                                         bool latent_elsewhere = false);

// Reads input_ids (I64 [L]), position_ids (F32 [3, S]), vision_latent (F32
// [1, C, T, H, W]), vision_timesteps (F32 or I64 [Nn]), und_len (I64 [],
// must equal L) and, if present, vision_condition_frame_mask (I64 [T]).
// Other tensors (fps, expected outputs, ...) are ignored.
ForwardInputs read_forward_inputs(const SafetensorsFile& file);

}  // namespace stepmix
