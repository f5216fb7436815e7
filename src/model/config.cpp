#include "model/config.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>

#include "io/json_input.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

using json = nlohmann::json;

// Keys Diffusers writes for Cosmos3OmniTransformer. Those stepmix does not
// use (training-only, the sizes of the sound/action heads, pipeline-side
// mRoPE settings, metadata) are accepted silently; the ones that would change
// the model (_class_name, rope_scaling, sound_gen, action_gen) are checked in
// parse_cosmos3_config; anything else earns a warning.
const std::set<std::string>& known_keys() {
  static const std::set<std::string> keys = {"_class_name",
                                             "_diffusers_version",
                                             "_name_or_path",
                                             "action_dim",
                                             "action_gen",
                                             "attention_bias",
                                             "attention_dropout",
                                             "base_fps",
                                             "dtype",
                                             "enable_fps_modulation",
                                             "head_dim",
                                             "hidden_act",
                                             "hidden_size",
                                             "intermediate_size",
                                             "latent_channel",
                                             "latent_patch_size",
                                             "num_attention_heads",
                                             "num_embodiment_domains",
                                             "num_hidden_layers",
                                             "num_key_value_heads",
                                             "patch_latent_dim",
                                             "qk_norm_for_text",
                                             "quantization_config",
                                             "rms_norm_eps",
                                             "rope_axes_dim",
                                             "rope_scaling",
                                             "rope_theta",
                                             "sound_dim",
                                             "sound_gen",
                                             "sound_latent_fps",
                                             "timestep_scale",
                                             "unified_3d_mrope_reset_spatial_ids",
                                             "unified_3d_mrope_temporal_modality_margin",
                                             "use_und_k_norm_for_gen",
                                             "vocab_size"};
  return keys;
}

// Upper bound of every size in the config. Real checkpoints stay far below it
// (hidden 4096, vocab 151936), and with each size at most 2^24 the widths
// computed from two of them (heads·head_dim, ...) cannot overflow int64, nor
// can head_dim/2 rotary slots or num_hidden_layers layers exhaust memory
// before the tensors are compared with the config.
constexpr int64_t kMaxConfigSize = int64_t(1) << 24;

// The transformer class this runtime implements (Diffusers' name, which the
// goldens and the embedded model carry).
constexpr const char* kTransformerClass = "Cosmos3OmniTransformer";

class ConfigReader {
 public:
  ConfigReader(const json& config, const std::string& path) : config_(config), path_(path) {}

  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw Error("model", path_ + ": " + key + ": " + message);
  }

  // The value of `key`, or nullptr when absent. Null is returned as null:
  // only the keys documented as nullable accept it (nullable()).
  const json* value(const std::string& key) const {
    auto it = config_.find(key);
    return it == config_.end() ? nullptr : &*it;
  }
  const json* nullable(const std::string& key) const {
    const json* v = value(key);
    return v && v->is_null() ? nullptr : v;
  }

  // Sizes define the architecture: they are read from the file, never taken
  // from a default (a missing hidden_size would otherwise become Nano's 4096
  // and fail much later, on a tensor shape).
  void read_size(const std::string& key, int64_t& out) const {
    const json* v = value(key);
    if (!v) fail(key, "missing; expected a positive integer (sizes are never defaulted)");
    if (const auto n = json_integer_in(*v, 1, kMaxConfigSize)) {
      out = *n;
      return;
    }
    // Out of range: quoted as written, not as a wrapped int64.
    if (json_integer_in(*v, 1, INT64_MAX) || v->is_number_unsigned())
      fail(key, v->dump() + " exceeds the limit of " + std::to_string(kMaxConfigSize));
    fail(key, "expected a positive integer, got " + v->dump());
  }

  // Absent keeps the Diffusers default; null is an error (Diffusers would
  // pass None through, which means something else than the default).
  void read_number(const std::string& key, double& out) const {
    if (const json* v = value(key)) {
      if (!v->is_number()) fail(key, "expected a number, got " + v->dump());
      out = v->get<double>();
    }
  }

  void read_bool(const std::string& key, bool& out) const {
    if (const json* v = value(key)) {
      if (!v->is_boolean()) fail(key, "expected true or false, got " + v->dump());
      out = v->get<bool>();
    }
  }

  // A feature flag stepmix does not implement: absent, null or false only.
  void require_off(const std::string& key, const std::string& feature) const {
    const json* v = nullable(key);
    if (!v || *v == false) return;
    if (!v->is_boolean()) fail(key, "expected true or false, got " + v->dump());
    fail(key, "true: " + feature + " is not implemented; stepmix refuses a checkpoint that declares it");
  }

  // rope_axes_dim, else rope_scaling.mrope_section, else the default.
  void read_rope_axes(std::array<int64_t, 3>& out) const {
    const json* scaling = nullable("rope_scaling");
    const json* section = nullptr;
    if (scaling) {
      // Only the legacy holder of the interleaved mRoPE section is the
      // rotary embedding implemented here; any other scaling (a factor, YaRN,
      // linear, dynamic) would change every position and is refused.
      if (!scaling->is_object()) fail("rope_scaling", "expected an object or null, got " + scaling->dump());
      for (const auto& [k, v] : scaling->items()) {
        if (k == "mrope_section") {
          if (!v.is_null()) section = &v;
        } else if (k == "rope_type") {
          if (v != "default")
            fail("rope_scaling.rope_type", "expected \"default\" (other RoPE scalings are not implemented), got " +
                                               v.dump());
        } else if (k == "mrope_interleaved") {
          if (v != true)
            fail("rope_scaling.mrope_interleaved", "expected true (the interleaved T/H/W layout), got " + v.dump());
        } else {
          fail("rope_scaling." + k, "not implemented (accepted: rope_type \"default\", mrope_interleaved true, "
                                    "mrope_section); got " + v.dump());
        }
      }
    }
    const json* axes = nullable("rope_axes_dim");
    if (axes && section && *axes != *section)
      fail("rope_scaling.mrope_section", section->dump() + " disagrees with rope_axes_dim " + axes->dump());
    std::string key = axes ? "rope_axes_dim" : "rope_scaling.mrope_section";
    const json* v = axes ? axes : section;
    if (!v) return;
    if (!v->is_array() || v->size() != 3) fail(key, "expected three integers [T, H, W], got " + v->dump());
    for (std::size_t i = 0; i < 3; ++i) {
      const auto n = json_integer_in((*v)[i], 0, INT64_MAX);
      if (!n) fail(key, "expected three non-negative integers [T, H, W], got " + v->dump());
      out[i] = *n;
    }
  }

 private:
  const json& config_;
  const std::string& path_;
};

}  // namespace

std::vector<RopeAxis> Cosmos3Config::rope_slot_axes() const {
  const int64_t slots = head_dim / 2;
  std::vector<RopeAxis> axes(std::size_t(slots), RopeAxis::T);
  for (int64_t j = 0; j < slots; ++j) {
    if (j % 3 == 1 && j < 3 * rope_axes_dim[1]) axes[std::size_t(j)] = RopeAxis::H;
    if (j % 3 == 2 && j < 3 * rope_axes_dim[2]) axes[std::size_t(j)] = RopeAxis::W;
  }
  return axes;
}

ParsedCosmos3Config parse_cosmos3_config(const json& config, const std::string& config_path) {
  if (!config.is_object()) throw Error("model", config_path + ": expected a JSON object");
  const ConfigReader r(config, config_path);
  ParsedCosmos3Config parsed;
  Cosmos3Config& c = parsed.config;

  if (const json* cls = r.value("_class_name"); cls && *cls != kTransformerClass)
    r.fail("_class_name", std::string("expected \"") + kTransformerClass + "\" (the Cosmos3 transformer), got " +
                              cls->dump());
  r.require_off("sound_gen", "sound generation");
  r.require_off("action_gen", "action generation");

  r.read_size("hidden_size", c.hidden_size);
  r.read_size("intermediate_size", c.intermediate_size);
  r.read_size("num_hidden_layers", c.num_hidden_layers);
  r.read_size("num_attention_heads", c.num_attention_heads);
  r.read_size("num_key_value_heads", c.num_key_value_heads);
  r.read_size("head_dim", c.head_dim);
  r.read_size("vocab_size", c.vocab_size);
  r.read_size("latent_channel", c.latent_channel);
  r.read_size("latent_patch_size", c.latent_patch_size);
  r.read_size("patch_latent_dim", c.patch_latent_dim);
  r.read_bool("attention_bias", c.attention_bias);
  r.read_bool("qk_norm_for_text", c.qk_norm_for_text);
  r.read_bool("use_und_k_norm_for_gen", c.use_und_k_norm_for_gen);
  r.read_number("rms_norm_eps", c.rms_norm_eps);
  r.read_number("rope_theta", c.rope_theta);
  r.read_number("timestep_scale", c.timestep_scale);
  r.read_rope_axes(c.rope_axes_dim);

  if (const json* act = r.value("hidden_act")) {
    const std::string name = act->is_string() ? act->get<std::string>() : act->dump();
    if (name == "silu")
      c.hidden_act = HiddenAct::SiLU;
    else if (name == "relu2")
      c.hidden_act = HiddenAct::ReLU2;
    else
      r.fail("hidden_act", "expected \"silu\" or \"relu2\", got " + act->dump());
  }

  if (c.num_attention_heads % c.num_key_value_heads != 0)
    r.fail("num_key_value_heads", std::to_string(c.num_key_value_heads) + " does not divide num_attention_heads " +
                                      std::to_string(c.num_attention_heads));
  if (c.head_dim % 2 != 0)
    r.fail("head_dim", "expected an even number (rotary pairs), got " + std::to_string(c.head_dim));
  const int64_t p = c.latent_patch_size;
  // Up to 2^72 with each factor at the size limit: multiply in 128 bits.
  const __int128 patch_dim = __int128(p) * p * c.latent_channel;
  if (__int128(c.patch_latent_dim) != patch_dim)
    r.fail("patch_latent_dim", "expected latent_patch_size² · latent_channel = " + std::to_string(p) + "²·" +
                                   std::to_string(c.latent_channel) +
                                   (patch_dim <= __int128(INT64_MAX) ? " = " + std::to_string(int64_t(patch_dim)) : "") +
                                   ", got " + std::to_string(c.patch_latent_dim));
  if (!(c.rms_norm_eps > 0)) r.fail("rms_norm_eps", "expected a positive number");
  if (!(c.rope_theta > 0)) r.fail("rope_theta", "expected a positive number");

  const int64_t slots = c.head_dim / 2;
  const auto& axes = c.rope_axes_dim;
  const std::string axes_text =
      "[" + std::to_string(axes[0]) + ", " + std::to_string(axes[1]) + ", " + std::to_string(axes[2]) + "]";
  for (int i : {1, 2})
    if (axes[i] > slots / 3)  // 3·axes[i] > slots, without overflowing for huge axes
      r.fail("rope_axes_dim", axes_text + ": 3·" + std::to_string(axes[i]) +
                                  " exceeds head_dim/2 = " + std::to_string(slots) + " frequency slots");
  int64_t t_slots = 0;
  for (RopeAxis axis : c.rope_slot_axes()) t_slots += axis == RopeAxis::T;
  if (t_slots != axes[0])
    r.fail("rope_axes_dim", axes_text + ": head_dim " + std::to_string(c.head_dim) + " leaves " +
                                std::to_string(t_slots) + " temporal slots, but rope_axes_dim[0] is " +
                                std::to_string(axes[0]));

  for (const auto& [key, value] : config.items())
    if (!known_keys().count(key))
      parsed.warnings.push_back("[model] " + config_path + ": " + key + ": unknown key, ignored");
  return parsed;
}

}  // namespace stepmix
