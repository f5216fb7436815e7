#include "pipeline/sequence.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

#include "stepmix/error.hpp"

namespace stepmix {
namespace {

using json = nlohmann::json;

template <class T>
T read_key(const json& config, const std::string& path, const char* key, T fallback) {
  // Absent is the default; null is not (Diffusers passes None through).
  if (!config.contains(key)) return fallback;
  const json& v = config[key];
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) throw Error("config", path + ": " + key + ": expected true or false, got " + v.dump());
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) throw Error("config", path + ": " + key + ": expected an integer, got " + v.dump());
    // Quoted as written: get<T>() would wrap 2^64-1 to -1.
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<T>::max()))
      throw Error("config", path + ": " + key + ": expected an integer below 2^63, got " + v.dump());
  } else {
    if (!v.is_number() || v.is_boolean()) throw Error("config", path + ": " + key + ": expected a number, got " + v.dump());
  }
  return v.get<T>();
}

}  // namespace

// Position ids are float32, exact for integers up to 2^24; the bound also
// keeps und_len + margin and H + patch_size - 1 far from int64 overflow.
constexpr int64_t kMaxPosition = int64_t(1) << 24;

SequenceSettings read_sequence_settings(const json& config, const std::string& path) {
  SequenceSettings s;
  s.base_fps = read_key(config, path, "base_fps", s.base_fps);
  s.enable_fps_modulation = read_key(config, path, "enable_fps_modulation", s.enable_fps_modulation);
  s.temporal_modality_margin =
      read_key(config, path, "unified_3d_mrope_temporal_modality_margin", s.temporal_modality_margin);
  s.reset_spatial_ids = read_key(config, path, "unified_3d_mrope_reset_spatial_ids", s.reset_spatial_ids);
  s.patch_size = read_key(config, path, "latent_patch_size", s.patch_size);
  if (!(s.base_fps > 0)) throw Error("config", path + ": base_fps: expected a positive number");
  if (s.temporal_modality_margin < 0 || s.temporal_modality_margin > kMaxPosition)
    throw Error("config", path + ": unified_3d_mrope_temporal_modality_margin: expected an integer in [0, " +
                              std::to_string(kMaxPosition) + "], got " + std::to_string(s.temporal_modality_margin));
  if (s.patch_size < 1 || s.patch_size > kMaxPosition)
    throw Error("config", path + ": latent_patch_size: expected an integer in [1, " + std::to_string(kMaxPosition) +
                              "], got " + std::to_string(s.patch_size));
  return s;
}

void check_temporal_positions(int64_t und_len, int64_t frames, double fps, const SequenceSettings& settings) {
  if (!(settings.enable_fps_modulation && frames > 1)) return;  // O + f: bounded with the sequence
  if (!(fps > 0)) throw Error("pipeline", "fps must be positive for a video, got " + Error::number(fps));
  // A frame rate far below base_fps spreads the frames past what float32
  // positions hold (and past infinity: NaN in the rotary embedding). The
  // arithmetic of build_position_ids.
  const float tps = float(fps) / 4.0f;
  const float base_tps = float(settings.base_fps) / 4.0f;
  const float last = (float(frames - 1) / tps) * base_tps + float(und_len + settings.temporal_modality_margin);
  if (!(std::fabs(last) <= float(kMaxPosition)))
    throw Error("pipeline", "fps " + Error::number(fps) + " with base_fps " + Error::number(settings.base_fps) +
                                " puts latent frame " + std::to_string(frames - 1) + " at temporal position " +
                                Error::number(last) + "; positions must stay within 2^24");
}

std::vector<float> build_position_ids(int64_t und_len, int64_t frames, int64_t patches_h, int64_t patches_w,
                                      double fps, const SequenceSettings& settings) {
  check_temporal_positions(und_len, frames, fps, settings);
  const int64_t S = und_len + frames * patches_h * patches_w;
  std::vector<float> pos(3 * S);
  for (int64_t s = 0; s < und_len; ++s) pos[s] = pos[S + s] = pos[2 * S + s] = float(s);
  const int64_t offset = und_len + settings.temporal_modality_margin;
  const bool modulate = settings.enable_fps_modulation && frames > 1;
  // Float32 in the reference's order: (f / tps) * base_tps + offset.
  const float tps = float(fps) / 4.0f;
  const float base_tps = float(settings.base_fps) / 4.0f;
  const int64_t spatial_offset = settings.reset_spatial_ids ? 0 : offset;
  int64_t col = und_len;
  for (int64_t f = 0; f < frames; ++f) {
    const float t = modulate ? (float(f) / tps) * base_tps + float(offset) : float(offset + f);
    for (int64_t h = 0; h < patches_h; ++h)
      for (int64_t w = 0; w < patches_w; ++w, ++col) {
        pos[col] = t;
        pos[S + col] = float(spatial_offset + h);
        pos[2 * S + col] = float(spatial_offset + w);
      }
  }
  return pos;
}

ForwardInputs make_pass_inputs(const std::vector<int64_t>& ids, const std::array<int64_t, 4>& latent_shape, double fps,
                               const SequenceSettings& settings) {
  const auto [C, T, H, W] = latent_shape;
  const int64_t p = settings.patch_size;
  ForwardInputs in;
  in.input_ids = ids;
  in.position_ids = build_position_ids(int64_t(ids.size()), T, (H + p - 1) / p, (W + p - 1) / p, fps, settings);
  in.latent.shape = {1, C, T, H, W};
  in.condition_frame_mask.assign(std::size_t(T), 0);
  return in;
}

}  // namespace stepmix
