#include "synthetic_checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/numerics.hpp"
#include "io/safetensors.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

// splitmix64: fast, seedable, and the same stream on every platform (the
// benchmark regenerates the same network on each run).
class UniformStream {
 public:
  explicit UniformStream(uint64_t seed) : state_(seed) {}
  // Uniform in [-1, 1).
  float next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return float(int64_t(z >> 40) - (int64_t(1) << 23)) * (1.0f / float(1 << 23));
  }

 private:
  uint64_t state_;
};

constexpr float kSqrt3 = 1.7320508075688772f;

// bf16 values with standard deviation `std` (uniform noise) around `mean`.
std::vector<uint16_t> random_bf16(UniformStream& rng, int64_t count, float mean, float std) {
  std::vector<uint16_t> out(static_cast<std::size_t>(count));
  for (uint16_t& x : out) x = float_to_bf16_rne(mean + std * kSqrt3 * rng.next());
  return out;
}

struct Writer {
  std::vector<TensorToWrite> tensors;

  void bf16(const std::string& name, std::vector<int64_t> shape, const std::vector<uint16_t>& v) {
    tensors.push_back(make_tensor_raw(name, DType::BF16, std::move(shape), v.data(), v.size() * 2));
  }
  void f32_scalar(const std::string& name, float v) { tensors.push_back(make_tensor_f32(name, {}, {v})); }
};

// A governed Linear [out, in]: BF16, or ModelOpt FP8 built from the same BF16 values.
void governed_linear(Writer& w, UniformStream& rng, const std::string& name, int64_t out, int64_t in, bool fp8) {
  const std::vector<uint16_t> weight = random_bf16(rng, out * in, 0.0f, 1.0f / std::sqrt(float(in)));
  if (!fp8) {
    w.bf16(name + ".weight", {out, in}, weight);
    return;
  }
  float amax = 0.0f;
  for (uint16_t x : weight) amax = std::max(amax, std::fabs(bf16_to_float(x)));
  const float weight_scale = amax / kE4M3Max;
  std::vector<uint8_t> codes(weight.size());
  for (std::size_t i = 0; i < weight.size(); ++i)
    codes[i] = quantize_e4m3_saturating(bf16_to_float(weight[i]) / weight_scale);
  w.tensors.push_back(make_tensor_raw(name + ".weight", DType::F8_E4M3, {out, in}, codes.data(), codes.size()));
  w.f32_scalar(name + ".weight_scale", weight_scale);
  w.f32_scalar(name + ".input_scale", 8.0f / kE4M3Max);
}

void norm_vector(Writer& w, UniformStream& rng, const std::string& name, int64_t n) {
  w.bf16(name, {n}, random_bf16(rng, n, 1.0f, 0.05f));
}

}  // namespace

nlohmann::json synthetic_config(const SyntheticModelShape& s, bool fp8) {
  // Slots: as many T slots as needed, H and W sharing the rest (Nano: 24/20/20 of 64).
  const int64_t slots = s.head_dim / 2;
  const int64_t spatial = (slots * 5 / 16);
  nlohmann::json c = {
      {"_class_name", "Cosmos3OmniTransformer"},
      {"attention_bias", false},
      {"head_dim", s.head_dim},
      {"hidden_act", "silu"},
      {"hidden_size", s.hidden_size},
      {"intermediate_size", s.intermediate_size},
      {"latent_channel", s.latent_channel},
      {"latent_patch_size", s.patch},
      {"num_attention_heads", s.heads},
      {"num_hidden_layers", s.layers},
      {"num_key_value_heads", s.kv_heads},
      {"patch_latent_dim", s.patch * s.patch * s.latent_channel},
      {"qk_norm_for_text", true},
      {"rms_norm_eps", 1e-6},
      {"rope_axes_dim", {slots - 2 * spatial, spatial, spatial}},
      {"rope_theta", 5000000.0},
      {"timestep_scale", 0.001},
      {"use_und_k_norm_for_gen", false},
      {"vocab_size", s.vocab_size},
  };
  if (fp8)
    c["quantization_config"] = {{"quant_method", "modelopt"},
                                {"quant_algo", "FP8"},
                                {"ignore", {"proj_in", "proj_out", "time_embedder*", "lm_head"}}};
  return c;
}

void write_synthetic_transformer(const std::string& folder, const SyntheticModelShape& s, bool fp8, uint64_t seed) {
  const int64_t E = s.hidden_size, I = s.intermediate_size, D = s.head_dim;
  const int64_t q_width = s.heads * D, kv_width = s.kv_heads * D, F = s.patch * s.patch * s.latent_channel;
  UniformStream rng(seed);
  Writer w;
  w.bf16("embed_tokens.weight", {s.vocab_size, E}, random_bf16(rng, s.vocab_size * E, 0.0f, 1.0f));
  for (int64_t k = 0; k < s.layers; ++k) {
    const std::string layer = "layers." + std::to_string(k);
    for (const char* norm : {"input_layernorm", "input_layernorm_moe_gen", "post_attention_layernorm",
                             "post_attention_layernorm_moe_gen"})
      norm_vector(w, rng, layer + "." + norm + ".weight", E);
    const std::string attn = layer + ".self_attn";
    for (const char* proj : {"to_q", "add_q_proj"}) governed_linear(w, rng, attn + "." + proj, q_width, E, fp8);
    for (const char* proj : {"to_k", "to_v", "add_k_proj", "add_v_proj"})
      governed_linear(w, rng, attn + "." + proj, kv_width, E, fp8);
    for (const char* proj : {"to_out", "to_add_out"}) governed_linear(w, rng, attn + "." + proj, E, q_width, fp8);
    for (const char* norm : {"norm_q", "norm_k", "norm_added_q", "norm_added_k"})
      norm_vector(w, rng, attn + "." + norm + ".weight", D);
    for (const char* mlp : {"mlp", "mlp_moe_gen"}) {
      const std::string m = layer + "." + mlp;
      governed_linear(w, rng, m + ".gate_proj", I, E, fp8);
      governed_linear(w, rng, m + ".up_proj", I, E, fp8);
      governed_linear(w, rng, m + ".down_proj", E, I, fp8);
    }
  }
  norm_vector(w, rng, "norm.weight", E);
  norm_vector(w, rng, "norm_moe_gen.weight", E);
  const auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    w.bf16(name + ".weight", {out, in}, random_bf16(rng, out * in, 0.0f, 1.0f / std::sqrt(float(in))));
    w.bf16(name + ".bias", {out}, random_bf16(rng, out, 0.0f, 0.02f));
  };
  linear("proj_in", E, F);
  linear("proj_out", F, E);
  linear("time_embedder.linear_1", E, 256);
  linear("time_embedder.linear_2", E, E);

  std::filesystem::create_directories(folder);
  write_file_atomic(folder + "/config.json", synthetic_config(s, fp8).dump(2) + "\n");
  write_safetensors(folder + "/diffusion_pytorch_model.safetensors", w.tensors, {{"format", "pt"}});
}

ForwardInputs synthetic_inputs(const SyntheticModelShape& s, int64_t text_tokens, int64_t latent_height,
                               int64_t latent_width, float timestep, uint64_t seed) {
  UniformStream rng(seed);
  ForwardInputs in;
  const int64_t L = text_tokens, C = s.latent_channel, H = latent_height, W = latent_width;
  const int64_t Hp = (H + s.patch - 1) / s.patch, Wp = (W + s.patch - 1) / s.patch, S = L + Hp * Wp;
  in.input_ids.resize(std::size_t(L));
  for (int64_t& id : in.input_ids) id = std::min<int64_t>(s.vocab_size - 1, int64_t((rng.next() + 1.0f) * 0.5f * float(s.vocab_size)));
  in.position_ids.assign(std::size_t(3 * S), 0.0f);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t axis = 0; axis < 3; ++axis) in.position_ids[std::size_t(axis * S + i)] = float(i);
  for (int64_t h = 0; h < Hp; ++h)
    for (int64_t w = 0; w < Wp; ++w) {
      const int64_t col = L + h * Wp + w;
      in.position_ids[std::size_t(col)] = float(L + 15000);
      in.position_ids[std::size_t(S + col)] = float(h);
      in.position_ids[std::size_t(2 * S + col)] = float(w);
    }
  in.latent.shape = {1, C, 1, H, W};
  in.latent.data.resize(std::size_t(C * H * W));
  for (float& x : in.latent.data) x = kSqrt3 * rng.next();
  in.timesteps = {timestep};
  return in;
}

void write_forward_inputs(const std::string& path, const ForwardInputs& in) {
  const int64_t L = int64_t(in.input_ids.size());
  const int64_t S = int64_t(in.position_ids.size() / 3);
  std::vector<TensorToWrite> t;
  t.push_back(make_tensor_raw("input_ids", DType::I64, {L}, in.input_ids.data(), in.input_ids.size() * 8));
  t.push_back(make_tensor_f32("position_ids", {3, S}, in.position_ids));
  t.push_back(make_tensor_f32("vision_latent", in.latent.shape, in.latent.data));
  t.push_back(make_tensor_f32("vision_timesteps", {int64_t(in.timesteps.size())}, in.timesteps));
  const int64_t und_len = L;
  t.push_back(make_tensor_raw("und_len", DType::I64, {}, &und_len, 8));
  write_safetensors(path, t);
}

}  // namespace stepmix
