#include "vae/config.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "io/checkpoint.hpp"
#include "stepmix/error.hpp"

namespace stepmix::vae {
namespace {

using json = nlohmann::json;

// Widths, channel counts and list lengths beyond these are refused before
// anything is sized from them (the real model: widths up to 1024, 4 levels).
constexpr int64_t kMaxWidth = int64_t(1) << 16;
constexpr int64_t kMaxLevels = 8;
constexpr int64_t kMaxResBlocks = 64;

class Reader {
 public:
  Reader(const json& config, const std::string& path) : config_(config), path_(path) {}

  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw Error("vae", path_ + ": " + key + ": " + message);
  }
  const json* value(const std::string& key) const {
    auto it = config_.find(key);
    return (it == config_.end() || it->is_null()) ? nullptr : &*it;
  }
  void integer(const std::string& key, int64_t& out, int64_t lo, int64_t hi) const {
    const json* v = value(key);
    if (!v) return;
    if (!v->is_number_integer() || v->get<int64_t>() < lo || v->get<int64_t>() > hi)
      fail(key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + v->dump());
    out = v->get<int64_t>();
  }
  // A key whose only supported value is `expected` (absent = Diffusers' default).
  void require_integer(const std::string& key, int64_t default_value, int64_t expected, const std::string& why) const {
    int64_t v = default_value;
    const json* j = value(key);
    if (j && !j->is_number_integer()) fail(key, "expected the integer " + std::to_string(expected) + ", got " + j->dump());
    if (j) v = j->get<int64_t>();
    if (v != expected)
      fail(key, "expected " + std::to_string(expected) + " (" + why + "), got " + (j ? j->dump() : std::to_string(v) + " (the default)"));
  }
  std::vector<float> floats(const std::string& key, int64_t count) const {
    const json* v = value(key);
    if (!v) fail(key, "missing: expected " + std::to_string(count) + " numbers (one per latent channel)");
    if (!v->is_array() || int64_t(v->size()) != count)
      fail(key, "expected a list of " + std::to_string(count) + " numbers (z_dim), got " +
                    (v->is_array() ? std::to_string(v->size()) + " entries" : v->dump()));
    std::vector<float> out;
    for (std::size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      // A channel's normalisation; the bound keeps it finite as a float
      // (1e39 used to pass as a double, become inf and decode to NaN).
      if (!e.is_number() || e.is_boolean() || !(std::fabs(e.get<double>()) <= 1e4))
        fail(key + "[" + std::to_string(i) + "]", "expected a finite number in [-1e4, 1e4], got " + e.dump());
      out.push_back(float(e.get<double>()));
    }
    return out;
  }

 private:
  const json& config_;
  const std::string& path_;
};

const std::set<std::string>& known_keys() {
  static const std::set<std::string> keys = {
      "_class_name",      "_diffusers_version",  "_name_or_path",          "attn_scales",  "base_dim",
      "clip_output",      "decoder_base_dim",    "dim_mult",               "dropout",      "in_channels",
      "is_residual",      "latents_mean",        "latents_std",            "num_res_blocks", "out_channels",
      "patch_size",       "scale_factor_spatial", "scale_factor_temporal", "temperal_downsample", "z_dim"};
  return keys;
}

}  // namespace

std::vector<int64_t> VaeConfig::encoder_widths() const {
  std::vector<int64_t> out{base_dim};
  for (int64_t m : dim_mult) out.push_back(base_dim * m);
  return out;
}

std::vector<int64_t> VaeConfig::decoder_widths() const {
  std::vector<int64_t> out{decoder_base_dim * dim_mult.back()};
  for (auto it = dim_mult.rbegin(); it != dim_mult.rend(); ++it) out.push_back(decoder_base_dim * *it);
  return out;
}

std::vector<bool> VaeConfig::decoder_temporal_upsample() const {
  return std::vector<bool>(temperal_downsample.rbegin(), temperal_downsample.rend());
}

int64_t VaeConfig::spatial_factor() const { return patch_size << (levels() - 1); }

int64_t VaeConfig::temporal_factor() const {
  int64_t f = 1;
  for (bool t : temperal_downsample) f *= t ? 2 : 1;
  return f;
}

VaeConfig parse_vae_config(const json& config, const std::string& path) {
  if (!config.is_object()) throw Error("vae", path + ": expected a JSON object");
  const Reader r(config, path);
  for (const auto& [key, _] : config.items())
    if (!known_keys().count(key)) r.fail(key, "unknown key (not an AutoencoderKLWan setting)");

  VaeConfig c;
  c.path = path;
  if (const json* v = r.value("_class_name"); v && *v != "AutoencoderKLWan")
    r.fail("_class_name", "expected \"AutoencoderKLWan\", got " + v->dump());
  if (const json* v = r.value("is_residual"); !v || !v->is_boolean() || !v->get<bool>())
    r.fail("is_residual", "expected true (the Wan2.2 residual blocks; the Wan2.1 variant is not implemented), got " +
                              (v ? v->dump() : std::string("false (the default)")));
  r.require_integer("z_dim", 16, 48, "Cosmos3's 48 latent channels");
  r.require_integer("patch_size", 0, 2, "the Wan2.2 2x2 pixel patch");
  c.z_dim = 48;
  c.patch_size = 2;
  r.integer("base_dim", c.base_dim, 1, kMaxWidth);
  c.decoder_base_dim = c.base_dim;
  r.integer("decoder_base_dim", c.decoder_base_dim, 1, kMaxWidth);
  r.integer("num_res_blocks", c.num_res_blocks, 1, kMaxResBlocks);

  if (const json* v = r.value("dim_mult")) {
    if (!v->is_array() || v->empty() || int64_t(v->size()) > kMaxLevels)
      r.fail("dim_mult", "expected a list of 1 to " + std::to_string(kMaxLevels) + " positive integers, got " + v->dump());
    c.dim_mult.clear();
    for (const json& m : *v) {
      if (!m.is_number_integer() || m.get<int64_t>() < 1 || m.get<int64_t>() > kMaxWidth)
        r.fail("dim_mult", "expected positive integers, got " + v->dump());
      c.dim_mult.push_back(m.get<int64_t>());
    }
  }
  for (int64_t m : c.dim_mult)
    if (c.base_dim * m > kMaxWidth || c.decoder_base_dim * m > kMaxWidth)
      r.fail("dim_mult", "widths base_dim·dim_mult above " + std::to_string(kMaxWidth));
  if (const json* v = r.value("temperal_downsample")) {
    if (!v->is_array()) r.fail("temperal_downsample", "expected a list of booleans, got " + v->dump());
    c.temperal_downsample.clear();
    for (const json& f : *v) {
      if (!f.is_boolean()) r.fail("temperal_downsample", "expected a list of booleans, got " + v->dump());
      c.temperal_downsample.push_back(f.get<bool>());
    }
  }
  if (int64_t(c.temperal_downsample.size()) != c.levels() - 1)
    r.fail("temperal_downsample", "expected " + std::to_string(c.levels() - 1) + " flags (one per level but the last of dim_mult), got " +
                                      std::to_string(c.temperal_downsample.size()));

  const int64_t patch_channels = 3 * c.patch_size * c.patch_size;
  r.require_integer("in_channels", 3, patch_channels, "3 colours times patch_size²");
  r.require_integer("out_channels", 3, patch_channels, "3 colours times patch_size²");
  r.require_integer("scale_factor_spatial", 8, c.spatial_factor(), "patch_size · 2^(len(dim_mult) − 1)");
  r.require_integer("scale_factor_temporal", 4, c.temporal_factor(), "2^(temporal down-sampling flags set)");

  // The parameter-free block shortcuts regroup channels: the average-down of
  // encoder level i needs e_i·f_i divisible by e_{i+1}, the duplicate-up of
  // decoder level i needs d_{i+1}·f_i divisible by d_i.
  const auto e = c.encoder_widths(), d = c.decoder_widths();
  const auto up_t = c.decoder_temporal_upsample();
  for (int i = 0; i < c.levels(); ++i) {
    const bool last = i == c.levels() - 1;
    const int64_t fe = last ? 1 : (c.temperal_downsample[std::size_t(i)] ? 8 : 4);
    if ((e[std::size_t(i)] * fe) % e[std::size_t(i) + 1] != 0)
      r.fail("dim_mult", "encoder level " + std::to_string(i) + " shortcut: width " + std::to_string(e[std::size_t(i)]) +
                             "·" + std::to_string(fe) + " is not a multiple of " + std::to_string(e[std::size_t(i) + 1]));
    if (!last) {
      const int64_t fd = up_t[std::size_t(i)] ? 8 : 4;
      if ((d[std::size_t(i) + 1] * fd) % d[std::size_t(i)] != 0)
        r.fail("dim_mult", "decoder level " + std::to_string(i) + " shortcut: width " + std::to_string(d[std::size_t(i) + 1]) +
                               "·" + std::to_string(fd) + " is not a multiple of " + std::to_string(d[std::size_t(i)]));
    }
  }

  // Accepted and without effect on inference: dropout (identity), attn_scales
  // (the residual encoder and the decoder ignore it), clip_output (gone from
  // the class: the output is always clamped).
  if (const json* v = r.value("dropout"); v && !(v->is_number() && v->get<double>() >= 0 && v->get<double>() <= 1))
    r.fail("dropout", "expected a probability in [0, 1], got " + v->dump());
  if (const json* v = r.value("attn_scales"); v && !v->is_array()) r.fail("attn_scales", "expected a list, got " + v->dump());
  if (const json* v = r.value("clip_output"); v && !v->is_boolean()) r.fail("clip_output", "expected a boolean, got " + v->dump());

  c.latents_mean = r.floats("latents_mean", c.z_dim);
  c.latents_std = r.floats("latents_std", c.z_dim);
  for (std::size_t i = 0; i < c.latents_std.size(); ++i)
    if (!(c.latents_std[i] > 0.0f) || !std::isfinite(1.0f / c.latents_std[i]))
      r.fail("latents_std[" + std::to_string(i) + "]", "expected a positive number, got " + std::to_string(c.latents_std[i]));
  return c;
}

VaeConfig read_vae_config(const std::string& path) { return parse_vae_config(read_json_file(path, "vae"), path); }

}  // namespace stepmix::vae
