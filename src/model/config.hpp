// Cosmos3OmniTransformer architecture from transformer/config.json
// as Diffusers writes it. Every size is read from the file, never
// assumed; the other keys default to Diffusers' defaults (= Nano) when absent.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace stepmix {

// "silu": gated SiLU MLP + standard RMSNorm; "relu2": squared-ReLU MLP
// without gate_proj + Nemotron RMSNorm (Cosmos3 Edge).
enum class HiddenAct { SiLU, ReLU2 };

// Which rotary position row (T, H or W) a frequency slot reads.
enum class RopeAxis : int { T = 0, H = 1, W = 2 };

struct Cosmos3Config {
  int64_t hidden_size = 4096;         // E
  int64_t intermediate_size = 12288;  // I
  int64_t num_hidden_layers = 36;
  int64_t num_attention_heads = 32;  // Hq
  int64_t num_key_value_heads = 8;   // Hkv
  int64_t head_dim = 128;            // D
  bool attention_bias = false;
  double rms_norm_eps = 1e-6;
  HiddenAct hidden_act = HiddenAct::SiLU;
  bool qk_norm_for_text = true;
  bool use_und_k_norm_for_gen = false;
  double rope_theta = 5000000.0;
  std::array<int64_t, 3> rope_axes_dim{24, 20, 20};  // frequency slots for T, H, W
  int64_t vocab_size = 151936;
  int64_t latent_channel = 48;     // C
  int64_t latent_patch_size = 2;   // p
  int64_t patch_latent_dim = 192;  // p·p·C
  double timestep_scale = 0.001;

  int64_t query_groups() const { return num_attention_heads / num_key_value_heads; }  // G
  int64_t q_width() const { return num_attention_heads * head_dim; }                  // Hq·D
  int64_t kv_width() const { return num_key_value_heads * head_dim; }                 // Hkv·D
  bool has_gate_proj() const { return hidden_act == HiddenAct::SiLU; }
  // Understanding keys get an extra norm before the generation stream reads them.
  bool has_und_k_norm_for_gen() const { return !qk_norm_for_text && use_und_k_norm_for_gen; }
  // Axis of each of the D/2 rotary frequency slots (interleaved T, H, W).
  std::vector<RopeAxis> rope_slot_axes() const;
};

struct ParsedCosmos3Config {
  Cosmos3Config config;
  std::vector<std::string> warnings;  // unknown keys, one line each
};

// Parses and validates: hidden_act ∈ {silu, relu2}, Hq % Hkv == 0,
// patch_latent_dim == p²·C, 3·rope_axes_dim[1|2] ≤ D/2, T slot count ==
// rope_axes_dim[0], even head_dim. Fail closed on what would change the
// model: the ten sizes must be present (positive integers of at most 2^24,
// never defaulted), null is accepted only for rope_axes_dim, rope_scaling and
// the sound_gen/action_gen flags, _class_name (when given) must be
// Cosmos3OmniTransformer, sound_gen and action_gen must be off, and
// rope_scaling may only be the legacy holder of the interleaved mRoPE
// section. Throws stepmix::Error ("model") naming config_path, the key, the
// value as written and what is accepted.
ParsedCosmos3Config parse_cosmos3_config(const nlohmann::json& config, const std::string& config_path);

}  // namespace stepmix
