// Decoder layers with float32 activations (ActivationDType::F32): the
// arithmetic the float32 goldens pin down. Buffers come from the forward
// workspace; row-wise pieces run on the thread pool, each row computed exactly
// as a single thread would, so results are bit-identical for any thread count.
#include <algorithm>
#include <array>

#include "model/attention.hpp"
#include "model/parallel.hpp"
#include "model/transformer.hpp"

namespace stepmix {
namespace {

// x: [rows, n] → out: [rows, n]; out may alias x.
void rms_norm_rows(const float* x, int64_t rows, int64_t n, const std::vector<float>& weight, float eps,
                   NormKind kind, float* out) {
  parallel_rows(rows, n, [&](int64_t r0, int64_t r1) {
    rms_norm(x + r0 * n, r1 - r0, n, weight.data(), eps, kind, out + r0 * n);
  });
}

// x[i] += y[i]
void add_in_place(float* x, const float* y, int64_t count) {
  parallel_ranges(count, kParallelGrainElements, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) x[i] += y[i];
  });
}

}  // namespace

// x: [rows, E] → out: [rows, E]
void Cosmos3Transformer::mlp_f32(const MlpWeights& w, const float* x, int64_t rows, float* out, LinearMode mode) {
  const int64_t I = config_.intermediate_size;
  float* up = workspace_.up.get(rows * I);
  if (w.gate_proj) {
    float* gate = workspace_.gate.get(rows * I);
    // up and gate read the same x: W8A8 quantizes it once when their s_x agree.
    Linear::forward_sharing_input(std::array<const Linear*, 2>{&w.up_proj, &*w.gate_proj}, x, rows,
                                  std::array<float*, 2>{up, gate}, mode);
    parallel_ranges(rows * I, kParallelGrainElements,
                    [&](int64_t b, int64_t e) { silu_gate(gate + b, up + b, e - b, up + b); });
  } else {
    w.up_proj.forward(x, rows, up, mode);
    parallel_ranges(rows * I, kParallelGrainElements, [&](int64_t b, int64_t e) { relu_squared(up + b, e - b); });
  }
  w.down_proj.forward(up, rows, out, mode);
}

// Text rows [0, L): embed → every layer's understanding half. Returns the
// keys/values the generation stream reads; records und_embed/und_hidden.{k}.
std::shared_ptr<const UnderstandingKV> Cosmos3Transformer::run_understanding_f32(const ForwardInputs& in,
                                                                                 const RopeTables& rope,
                                                                                 LinearMode mode, ForwardDebug* debug) {
  const Cosmos3Config& c = config_;
  const int64_t L = int64_t(in.input_ids.size()), E = c.hidden_size, D = c.head_dim;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const float eps = float(c.rms_norm_eps);

  std::vector<float> und = embed_text(in);  // [L, E]
  if (debug) debug->record("und_embed", {L, E}, und.data());

  auto kv = std::make_shared<UnderstandingKV>();
  float* normed = workspace_.normed.get(L * E);
  float* q = workspace_.q.get(L * c.q_width());
  float* attended = workspace_.attended.get(L * c.q_width());
  float* projected = workspace_.projected.get(L * E);
  const AttentionProblem causal{L, L, Hq, Hkv, D, true};
  for (int64_t k = 0; k < c.num_hidden_layers; ++k) {
    const DecoderLayerWeights& layer = weights_.layers[std::size_t(k)];
    const AttentionWeights& a = layer.attention;
    UnderstandingLayerKV layer_kv;
    layer_kv.keys.resize(std::size_t(L * c.kv_width()));
    layer_kv.values.resize(std::size_t(L * c.kv_width()));
    float* keys = layer_kv.keys.data();  // [L, Hkv, D]

    rms_norm_rows(und.data(), L, E, layer.input_layernorm, eps, norm_kind_, normed);
    Linear::forward_sharing_input(std::array<const Linear*, 3>{&a.to_q, &a.to_k, &a.to_v}, normed, L,
                                  std::array<float*, 3>{q, keys, layer_kv.values.data()}, mode);
    if (c.qk_norm_for_text) {
      rms_norm_rows(q, L * Hq, D, a.norm_q, eps, norm_kind_, q);
      rms_norm_rows(keys, L * Hkv, D, a.norm_k, eps, norm_kind_, keys);
    }
    // The generation stream may see differently normalised keys than the
    // understanding stream itself.
    const float* causal_keys = keys;
    if (c.has_und_k_norm_for_gen()) {
      float* own_keys = workspace_.own_keys.get(L * c.kv_width());
      std::copy_n(keys, L * c.kv_width(), own_keys);
      rms_norm_rows(keys, L * Hkv, D, a.k_norm_und_for_gen, eps, norm_kind_, keys);
      apply_rotary(own_keys, L, Hkv, D, rope.cos_row(0), rope.sin_row(0));
      causal_keys = own_keys;
    }
    apply_rotary(q, L, Hq, D, rope.cos_row(0), rope.sin_row(0));
    apply_rotary(keys, L, Hkv, D, rope.cos_row(0), rope.sin_row(0));
    attention_blocked(causal, q, causal_keys, layer_kv.values.data(), attended);

    a.to_out.forward(attended, L, projected, mode);
    add_in_place(und.data(), projected, L * E);
    rms_norm_rows(und.data(), L, E, layer.post_attention_layernorm, eps, norm_kind_, normed);
    mlp_f32(layer.mlp, normed, L, projected, mode);
    add_in_place(und.data(), projected, L * E);
    if (debug) debug->record("und_hidden." + std::to_string(k), {L, E}, und.data());
    kv->layers.push_back(std::move(layer_kv));
  }
  return kv;
}

// gen: [Nv, E] in place through one decoder layer's generation half, which
// attends to [understanding keys; generation keys] without a mask.
void Cosmos3Transformer::generation_layer_f32(int64_t k, float* gen, const UnderstandingLayerKV& und_kv,
                                              const RopeTables& rope, const ForwardGeometry& g, LinearMode mode) {
  const Cosmos3Config& c = config_;
  const int64_t L = g.und_len, Nv = g.vision_tokens(), E = c.hidden_size, D = c.head_dim;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, KV = c.kv_width();
  const float eps = float(c.rms_norm_eps);
  const DecoderLayerWeights& layer = weights_.layers[std::size_t(k)];
  const AttentionWeights& a = layer.attention;

  float* normed = workspace_.normed.get(Nv * E);
  float* q = workspace_.q.get(Nv * c.q_width());
  float* keys = workspace_.keys.get((L + Nv) * KV);  // [L + Nv, Hkv, D]
  float* values = workspace_.values.get((L + Nv) * KV);
  std::copy(und_kv.keys.begin(), und_kv.keys.end(), keys);
  std::copy(und_kv.values.begin(), und_kv.values.end(), values);
  float* gen_keys = keys + L * KV;

  rms_norm_rows(gen, Nv, E, layer.input_layernorm_moe_gen, eps, norm_kind_, normed);
  Linear::forward_sharing_input(std::array<const Linear*, 3>{&a.add_q_proj, &a.add_k_proj, &a.add_v_proj}, normed,
                                Nv, std::array<float*, 3>{q, gen_keys, values + L * KV}, mode);
  rms_norm_rows(q, Nv * Hq, D, a.norm_added_q, eps, norm_kind_, q);
  rms_norm_rows(gen_keys, Nv * Hkv, D, a.norm_added_k, eps, norm_kind_, gen_keys);
  parallel_rows(Nv, c.q_width(), [&](int64_t r0, int64_t r1) {
    apply_rotary(q + r0 * c.q_width(), r1 - r0, Hq, D, rope.cos_row(L + r0), rope.sin_row(L + r0));
    apply_rotary(gen_keys + r0 * KV, r1 - r0, Hkv, D, rope.cos_row(L + r0), rope.sin_row(L + r0));
  });

  float* attended = workspace_.attended.get(Nv * c.q_width());
  float* projected = workspace_.projected.get(Nv * E);
  attention_blocked({Nv, L + Nv, Hq, Hkv, D, false}, q, keys, values, attended);
  a.to_add_out.forward(attended, Nv, projected, mode);
  add_in_place(gen, projected, Nv * E);
  rms_norm_rows(gen, Nv, E, layer.post_attention_layernorm_moe_gen, eps, norm_kind_, normed);
  mlp_f32(layer.mlp_moe_gen, normed, Nv, projected, mode);
  add_in_place(gen, projected, Nv * E);
}

}  // namespace stepmix
