// Decoder layers with bf16 activations (ActivationDType::BF16).
//
// Every Linear takes and returns bf16 (its BF16-activation overload). What
// stays float32, and why:
//  - the residual streams (und, gen): each layer adds a bf16 Linear output to
//    them; keeping the sum in float32 avoids a rounding per layer at the
//    cost of 4 instead of 2 bytes per element of one [rows, E] tensor;
//  - RMSNorm statistics and products, per-head q/k norm and rotary, fused and
//    rounded to bf16 once (the reference rounds after the norm and again after
//    each rotary product);
//  - softmax (see attention_bf16.hpp), SiLU·up (rounded once).
// So this path differs from the float32 one only by rounding the Linear
// inputs, Linear outputs, attention operands and softmax weights to bf16.
#include <algorithm>
#include <array>

#include "model/attention_bf16.hpp"
#include "model/transformer.hpp"

namespace stepmix {

// x: [rows, E] bf16 → out: [rows, E] bf16
void Cosmos3Transformer::mlp_bf16(const MlpWeights& w, const uint16_t* x, int64_t rows, uint16_t* out,
                                  LinearMode mode) {
  const int64_t I = config_.intermediate_size;
  uint16_t* up = workspace_.up_bf16.get(rows * I);
  if (w.gate_proj) {
    uint16_t* gate = workspace_.gate_bf16.get(rows * I);
    // up and gate read the same x: W8A8 quantizes it once when their s_x agree.
    Linear::forward_sharing_input(std::array<const Linear*, 2>{&w.up_proj, &*w.gate_proj}, x, rows,
                                  std::array<uint16_t*, 2>{up, gate}, mode);
    silu_gate_bf16(gate, up, rows * I, up);
  } else {
    w.up_proj.forward(x, rows, up, mode);
    relu_squared_bf16(up, rows * I);
  }
  w.down_proj.forward(up, rows, out, mode);
}

// Text rows [0, L) as in run_understanding_f32, with bf16 activations; the
// cached keys/values are bf16.
std::shared_ptr<const UnderstandingKV> Cosmos3Transformer::run_understanding_bf16(const ForwardInputs& in,
                                                                                  const RopeTables& rope,
                                                                                  LinearMode mode,
                                                                                  ForwardDebug* debug) {
  const Cosmos3Config& c = config_;
  const int64_t L = int64_t(in.input_ids.size()), E = c.hidden_size, D = c.head_dim;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, KV = c.kv_width();
  const float eps = float(c.rms_norm_eps);

  std::vector<float> und = embed_text(in);  // [L, E] float32 residual
  if (debug) debug->record("und_embed", {L, E}, und.data());

  auto kv = std::make_shared<UnderstandingKV>();
  uint16_t* normed = workspace_.normed_bf16.get(L * E);
  uint16_t* q = workspace_.q_bf16.get(L * c.q_width());
  uint16_t* attended = workspace_.attended_bf16.get(L * c.q_width());
  uint16_t* projected = workspace_.projected_bf16.get(L * E);
  const float* cos = rope.cos_row(0);
  const float* sin = rope.sin_row(0);
  for (int64_t k = 0; k < c.num_hidden_layers; ++k) {
    const DecoderLayerWeights& layer = weights_.layers[std::size_t(k)];
    const AttentionWeights& a = layer.attention;
    UnderstandingLayerKV layer_kv;
    layer_kv.keys_bf16.resize(std::size_t(L * KV));
    layer_kv.values_bf16.resize(std::size_t(L * KV));
    uint16_t* keys = layer_kv.keys_bf16.data();  // [L, Hkv, D]

    rms_norm_to_bf16(und.data(), L, E, layer.input_layernorm.data(), eps, norm_kind_, normed);
    Linear::forward_sharing_input(std::array<const Linear*, 3>{&a.to_q, &a.to_k, &a.to_v}, normed, L,
                                  std::array<uint16_t*, 3>{q, keys, layer_kv.values_bf16.data()}, mode);
    const float* q_norm = c.qk_norm_for_text ? a.norm_q.data() : nullptr;
    head_norm_rotary_bf16(q, L, Hq, D, q_norm, eps, norm_kind_, cos, sin);
    // The generation stream may see differently normalised keys than the
    // understanding stream itself (only when qk_norm_for_text is off).
    const uint16_t* causal_keys = keys;
    if (c.has_und_k_norm_for_gen()) {
      uint16_t* own_keys = workspace_.own_keys_bf16.get(L * KV);
      std::copy_n(keys, L * KV, own_keys);
      head_norm_rotary_bf16(own_keys, L, Hkv, D, nullptr, eps, norm_kind_, cos, sin);
      head_norm_rotary_bf16(keys, L, Hkv, D, a.k_norm_und_for_gen.data(), eps, norm_kind_, cos, sin);
      causal_keys = own_keys;
    } else {
      head_norm_rotary_bf16(keys, L, Hkv, D, c.qk_norm_for_text ? a.norm_k.data() : nullptr, eps, norm_kind_, cos,
                            sin);
    }
    attention_bf16({L, L, Hq, Hkv, D, true}, q, causal_keys, layer_kv.values_bf16.data(), attended);

    a.to_out.forward(attended, L, projected, mode);
    add_bf16_to_f32(und.data(), projected, L * E);
    rms_norm_to_bf16(und.data(), L, E, layer.post_attention_layernorm.data(), eps, norm_kind_, normed);
    mlp_bf16(layer.mlp, normed, L, projected, mode);
    add_bf16_to_f32(und.data(), projected, L * E);
    if (debug) debug->record("und_hidden." + std::to_string(k), {L, E}, und.data());
    kv->layers.push_back(std::move(layer_kv));
  }
  return kv;
}

// gen: [Nv, E] float32, in place through one layer's generation half:
// attention over [understanding keys; generation keys] (bf16), no mask.
void Cosmos3Transformer::generation_layer_bf16(int64_t k, float* gen, const UnderstandingLayerKV& und_kv,
                                               const RopeTables& rope, const ForwardGeometry& g, LinearMode mode) {
  const Cosmos3Config& c = config_;
  const int64_t L = g.und_len, Nv = g.vision_tokens(), E = c.hidden_size, D = c.head_dim;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, KV = c.kv_width();
  const float eps = float(c.rms_norm_eps);
  const DecoderLayerWeights& layer = weights_.layers[std::size_t(k)];
  const AttentionWeights& a = layer.attention;

  uint16_t* normed = workspace_.normed_bf16.get(Nv * E);
  uint16_t* q = workspace_.q_bf16.get(Nv * c.q_width());
  uint16_t* keys = workspace_.keys_bf16.get((L + Nv) * KV);  // [L + Nv, Hkv, D]
  uint16_t* values = workspace_.values_bf16.get((L + Nv) * KV);
  std::copy(und_kv.keys_bf16.begin(), und_kv.keys_bf16.end(), keys);
  std::copy(und_kv.values_bf16.begin(), und_kv.values_bf16.end(), values);
  uint16_t* gen_keys = keys + L * KV;

  rms_norm_to_bf16(gen, Nv, E, layer.input_layernorm_moe_gen.data(), eps, norm_kind_, normed);
  Linear::forward_sharing_input(std::array<const Linear*, 3>{&a.add_q_proj, &a.add_k_proj, &a.add_v_proj}, normed,
                                Nv, std::array<uint16_t*, 3>{q, gen_keys, values + L * KV}, mode);
  head_norm_rotary_bf16(q, Nv, Hq, D, a.norm_added_q.data(), eps, norm_kind_, rope.cos_row(L), rope.sin_row(L));
  head_norm_rotary_bf16(gen_keys, Nv, Hkv, D, a.norm_added_k.data(), eps, norm_kind_, rope.cos_row(L),
                        rope.sin_row(L));

  uint16_t* attended = workspace_.attended_bf16.get(Nv * c.q_width());
  uint16_t* projected = workspace_.projected_bf16.get(Nv * E);
  attention_bf16({Nv, L + Nv, Hq, Hkv, D, false}, q, keys, values, attended);
  a.to_add_out.forward(attended, Nv, projected, mode);
  add_bf16_to_f32(gen, projected, Nv * E);
  rms_norm_to_bf16(gen, Nv, E, layer.post_attention_layernorm_moe_gen.data(), eps, norm_kind_, normed);
  mlp_bf16(layer.mlp_moe_gen, normed, Nv, projected, mode);
  add_bf16_to_f32(gen, projected, Nv * E);
}

}  // namespace stepmix
