#include "model/forward_inputs.hpp"

#include <cmath>

#include "core/non_finite.hpp"
#include "io/safetensors.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

[[noreturn]] void fail(const std::string& message) { throw Error("model", "forward inputs: " + message); }

const TensorView& require(const SafetensorsFile& file, const std::string& name) {
  const TensorView* t = file.find(name);
  if (!t) throw Error("model", file.path() + ": missing tensor '" + name + "'");
  return *t;
}

std::vector<int64_t> read_integers(const SafetensorsFile& file, const TensorView& t) {
  if (t.dtype != DType::I64)
    throw Error("model",
                file.path() + ": tensor '" + t.name + "' is " + std::string(dtype_name(t.dtype)) + ", expected I64");
  return std::vector<int64_t>(t.as<int64_t>(), t.as<int64_t>() + t.numel());
}

std::vector<float> read_floats(const SafetensorsFile& file, const TensorView& t) {
  if (t.dtype == DType::I64) {
    std::vector<float> out(std::size_t(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) out[std::size_t(i)] = float(t.as<int64_t>()[i]);
    return out;
  }
  if (t.dtype != DType::F32)
    throw Error("model",
                file.path() + ": tensor '" + t.name + "' is " + std::string(dtype_name(t.dtype)) + ", expected F32");
  return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
}

}  // namespace

ForwardGeometry resolve_forward_geometry(const ForwardInputs& in, const Cosmos3Config& config,
                                         bool latent_elsewhere) {
  ForwardGeometry g;
  const auto& shape = in.latent.shape;
  if (shape.size() != 5 || shape[0] != 1 || shape[1] != config.latent_channel || shape[2] < 1 || shape[3] < 1 ||
      shape[4] < 1)
    fail("latent has shape " + shape_to_string(shape) +
         ", expected [1, latent_channel=" + std::to_string(config.latent_channel) + ", T, H, W] with T, H, W >= 1");
  g.grid = PatchGrid{shape[1], shape[2], shape[3], shape[4], config.latent_patch_size};
  if (!latent_elsewhere &&
      int64_t(in.latent.data.size()) != g.grid.channels * g.grid.frames * g.grid.height * g.grid.width)
    fail("latent holds " + std::to_string(in.latent.data.size()) + " values for shape " + shape_to_string(shape));

  g.und_len = int64_t(in.input_ids.size());
  if (g.und_len < 1) fail("input_ids is empty; the understanding stream needs at least one token");
  for (std::size_t i = 0; i < in.input_ids.size(); ++i)
    if (in.input_ids[i] < 0 || in.input_ids[i] >= config.vocab_size)
      fail("input_ids[" + std::to_string(i) + "] = " + std::to_string(in.input_ids[i]) +
           " is outside [0, vocab_size=" + std::to_string(config.vocab_size) + ")");
  g.sequence_length = g.und_len + g.grid.tokens();
  if (int64_t(in.position_ids.size()) != 3 * g.sequence_length)
    fail("position_ids holds " + std::to_string(in.position_ids.size()) + " values, expected [3, S] with S = und_len " +
         std::to_string(g.und_len) + " + vision tokens " + std::to_string(g.grid.tokens()) + " = " +
         std::to_string(g.sequence_length));

  const auto& mask = in.condition_frame_mask;
  if (!mask.empty() && int64_t(mask.size()) != g.grid.frames)
    fail("condition_frame_mask has " + std::to_string(mask.size()) + " entries for " + std::to_string(g.grid.frames) +
         " latent frames");
  for (int64_t t = 0; t < g.grid.frames; ++t) {
    const int64_t m = mask.empty() ? 0 : mask[std::size_t(t)];
    if (m != 0 && m != 1)
      fail("condition_frame_mask[" + std::to_string(t) + "] = " + std::to_string(m) + ", expected 0 or 1");
    if (m == 0) g.noisy_frames.push_back(t);
  }

  const int64_t noisy = g.noisy_tokens();
  if (in.timesteps.size() == 1) {
    g.noisy_timesteps.assign(std::size_t(noisy), in.timesteps[0]);
  } else if (int64_t(in.timesteps.size()) == noisy) {
    g.noisy_timesteps = in.timesteps;
  } else {
    fail("timesteps has " + std::to_string(in.timesteps.size()) + " values, expected 1 or one per noisy token (" +
         std::to_string(noisy) + ")");
  }
  for (float t : g.noisy_timesteps)
    if (!std::isfinite(t)) fail("timesteps must be finite");
  return g;
}

namespace {

// A NaN or Inf in an input makes every output NaN; refuse it by name instead.
void require_finite(const SafetensorsFile& file, const char* name, const std::vector<float>& values) {
  if (const auto bad = first_non_finite(values.data(), values.size()))
    throw Error("model", file.path() + ": tensor '" + name + "' holds a non-finite value at element " +
                             std::to_string(*bad) + "; expected finite numbers");
}

}  // namespace

ForwardInputs read_forward_inputs(const SafetensorsFile& file) {
  ForwardInputs in;
  in.input_ids = read_integers(file, require(file, "input_ids"));
  const TensorView& positions = require(file, "position_ids");
  if (positions.rank() != 2 || positions.shape[0] != 3)
    throw Error("model",
                file.path() + ": position_ids has shape " + shape_to_string(positions.shape) + ", expected [3, S]");
  in.position_ids = read_floats(file, positions);
  require_finite(file, "position_ids", in.position_ids);
  const TensorView& latent = require(file, "vision_latent");
  in.latent = HostTensor{latent.shape, read_floats(file, latent)};
  require_finite(file, "vision_latent", in.latent.data);
  in.timesteps = read_floats(file, require(file, "vision_timesteps"));
  require_finite(file, "vision_timesteps", in.timesteps);
  const std::vector<int64_t> und_len = read_integers(file, require(file, "und_len"));
  if (und_len.size() != 1 || und_len[0] != int64_t(in.input_ids.size()))
    throw Error("model", file.path() + ": und_len must be one value equal to the " +
                             std::to_string(in.input_ids.size()) + " input_ids (text rows come first)");
  if (const TensorView* mask = file.find("vision_condition_frame_mask"))
    in.condition_frame_mask = read_integers(file, *mask);
  return in;
}

}  // namespace stepmix
