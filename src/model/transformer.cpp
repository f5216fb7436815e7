#include "model/transformer.hpp"

#include <functional>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/numerics.hpp"
#include "model/attention.hpp"
#include "model/embedding.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

// Row-major float32 buffer [rows, cols].
std::vector<float> buffer(int64_t rows, int64_t cols) { return std::vector<float>(std::size_t(rows * cols)); }

void add_in_place(std::vector<float>& x, const std::vector<float>& y) {
  for (std::size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

}  // namespace

void ForwardDebug::record(const std::string& name, std::vector<int64_t> shape, const float* data) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  tensors[name] = HostTensor{std::move(shape), std::vector<float>(data, data + n)};
}

Cosmos3Transformer::Cosmos3Transformer(Cosmos3Config config, std::vector<std::string> warnings, Cosmos3Weights weights)
    : config_(std::move(config)),
      warnings_(std::move(warnings)),
      weights_(std::move(weights)),
      norm_kind_(config_.hidden_act == HiddenAct::ReLU2 ? NormKind::Nemotron : NormKind::Standard) {}

Cosmos3Transformer Cosmos3Transformer::load(const ModelDirectory& dir, WeightCache cache) {
  return load(TensorStore::open_folder(dir.transformer_dir), dir.config, dir.config_path, cache);
}

Cosmos3Transformer Cosmos3Transformer::load(const TensorStore& store, const nlohmann::json& config,
                                            const std::string& config_path, WeightCache cache) {
  ParsedCosmos3Config parsed = parse_cosmos3_config(config, config_path);
  Cosmos3Weights weights = load_cosmos3_weights(store, parsed.config, cache);
  return Cosmos3Transformer(std::move(parsed.config), std::move(parsed.warnings), std::move(weights));
}

void Cosmos3Transformer::for_each_governed_linear(const std::function<void(Linear&)>& fn) {
  for (DecoderLayerWeights& layer : weights_.layers) {
    AttentionWeights& a = layer.attention;
    for (Linear* l : {&a.to_q, &a.to_k, &a.to_v, &a.to_out, &a.add_q_proj, &a.add_k_proj, &a.add_v_proj, &a.to_add_out})
      fn(*l);
    for (MlpWeights* m : {&layer.mlp, &layer.mlp_moe_gen}) {
      if (m->gate_proj) fn(*m->gate_proj);
      fn(m->up_proj);
      fn(m->down_proj);
    }
  }
}

void Cosmos3Transformer::set_activation_code_hook(const ActivationCodeHook& hook) {
  for_each_governed_linear([&](Linear& l) { l.set_code_hook(hook); });
}

void Cosmos3Transformer::check_tower_mode(const char* tower, int fp8_linears, LinearMode mode) const {
  if (fp8_linears > 0 && mode == LinearMode::Dense)
    throw Error("model", std::string("the ") + tower + " tower holds " + std::to_string(fp8_linears) +
                             " FP8 Linears, which run W8A16 or W8A8; dense arithmetic needs the BF16 checkpoint");
}

// x: [rows, E] → out: [rows, E]
void Cosmos3Transformer::mlp(const MlpWeights& w, const float* x, int64_t rows, float* out, LinearMode mode) const {
  const int64_t I = config_.intermediate_size;
  std::vector<float> up = buffer(rows, I);
  w.up_proj.forward(x, rows, up.data(), mode);
  if (w.gate_proj) {
    std::vector<float> gate = buffer(rows, I);
    w.gate_proj->forward(x, rows, gate.data(), mode);
    silu_gate(gate.data(), up.data(), rows * I, up.data());
  } else {
    relu_squared(up.data(), rows * I);
  }
  w.down_proj.forward(up.data(), rows, out, mode);
}

// Text rows [0, L): embed → every layer's understanding half. Returns the
// keys/values the generation stream reads; records und_embed/und_hidden.{k}.
std::shared_ptr<const UnderstandingKV> Cosmos3Transformer::run_understanding(const ForwardInputs& in,
                                                                             const RopeTables& rope, LinearMode mode,
                                                                             ForwardDebug* debug) const {
  const Cosmos3Config& c = config_;
  const int64_t L = int64_t(in.input_ids.size()), E = c.hidden_size, D = c.head_dim;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const float eps = float(c.rms_norm_eps);

  std::vector<float> und = buffer(L, E);  // [L, E]
  const TensorView& table = weights_.embed_tokens;
  for (int64_t i = 0; i < L; ++i) {
    const int64_t row = in.input_ids[std::size_t(i)] * E;
    for (int64_t e = 0; e < E; ++e)
      und[std::size_t(i * E + e)] =
          table.dtype == DType::BF16 ? bf16_to_float(table.as<uint16_t>()[row + e]) : table.as<float>()[row + e];
  }
  if (debug) debug->record("und_embed", {L, E}, und.data());

  auto kv = std::make_shared<UnderstandingKV>();
  std::vector<float> normed = buffer(L, E), q = buffer(L, c.q_width()), attended = buffer(L, c.q_width());
  std::vector<float> projected = buffer(L, E);
  const AttentionProblem causal{L, L, Hq, Hkv, D, true};
  for (int64_t k = 0; k < c.num_hidden_layers; ++k) {
    const DecoderLayerWeights& layer = weights_.layers[std::size_t(k)];
    const AttentionWeights& a = layer.attention;
    UnderstandingLayerKV layer_kv{buffer(L, c.kv_width()), buffer(L, c.kv_width())};
    std::vector<float>& keys = layer_kv.keys;  // [L, Hkv, D]

    rms_norm(und.data(), L, E, layer.input_layernorm.data(), eps, norm_kind_, normed.data());
    a.to_q.forward(normed.data(), L, q.data(), mode);
    a.to_k.forward(normed.data(), L, keys.data(), mode);
    a.to_v.forward(normed.data(), L, layer_kv.values.data(), mode);
    if (c.qk_norm_for_text) {
      rms_norm(q.data(), L * Hq, D, a.norm_q.data(), eps, norm_kind_, q.data());
      rms_norm(keys.data(), L * Hkv, D, a.norm_k.data(), eps, norm_kind_, keys.data());
    }
    // The generation stream may see differently normalised keys than the
    // understanding stream itself.
    std::vector<float> own_keys;
    if (c.has_und_k_norm_for_gen()) {
      own_keys = keys;
      rms_norm(keys.data(), L * Hkv, D, a.k_norm_und_for_gen.data(), eps, norm_kind_, keys.data());
      apply_rotary(own_keys.data(), L, Hkv, D, rope.cos_row(0), rope.sin_row(0));
    }
    apply_rotary(q.data(), L, Hq, D, rope.cos_row(0), rope.sin_row(0));
    apply_rotary(keys.data(), L, Hkv, D, rope.cos_row(0), rope.sin_row(0));
    const float* causal_keys = own_keys.empty() ? keys.data() : own_keys.data();
    attention_blocked(causal, q.data(), causal_keys, layer_kv.values.data(), attended.data());

    a.to_out.forward(attended.data(), L, projected.data(), mode);
    add_in_place(und, projected);
    rms_norm(und.data(), L, E, layer.post_attention_layernorm.data(), eps, norm_kind_, normed.data());
    mlp(layer.mlp, normed.data(), L, projected.data(), mode);
    add_in_place(und, projected);
    if (debug) debug->record("und_hidden." + std::to_string(k), {L, E}, und.data());
    kv->layers.push_back(std::move(layer_kv));
  }
  return kv;
}

// The understanding K/V for this prompt and reasoner precision, from the cache
// when possible; a debug call recomputes so that und_hidden.{k} are recorded.
std::shared_ptr<const UnderstandingKV> Cosmos3Transformer::understanding(const ForwardInputs& in,
                                                                         const ForwardGeometry& g,
                                                                         const RopeTables& rope, LinearMode mode,
                                                                         ForwardDebug* debug) {
  const int64_t L = g.und_len, S = g.sequence_length;
  UnderstandingKey key{in.input_ids, {}, mode};
  key.positions.reserve(std::size_t(3 * L));
  for (int64_t axis = 0; axis < 3; ++axis)
    key.positions.insert(key.positions.end(), in.position_ids.begin() + axis * S,
                         in.position_ids.begin() + axis * S + L);
  if (!debug)
    if (auto cached = understanding_cache_.find(key)) return cached;
  auto kv = run_understanding(in, rope, mode, debug);
  understanding_cache_.insert(std::move(key), kv);
  return kv;
}

// Vision rows: patchify → proj_in, + timestep embedding on noisy frames.
// Returns gen: [Nv, E]; records vision_proj_in, timestep_embed, gen_embed.
std::vector<float> Cosmos3Transformer::embed_vision(const ForwardInputs& in, const ForwardGeometry& g,
                                                    ForwardDebug* debug) const {
  const int64_t E = config_.hidden_size, Nv = g.vision_tokens(), Nn = g.noisy_tokens();
  const int64_t per_frame = g.grid.tokens_per_frame();
  const std::vector<float> patches = patchify(in.latent.data.data(), g.grid);  // [Nv, p²C]
  std::vector<float> gen = buffer(Nv, E);
  weights_.proj_in.forward(patches.data(), Nv, gen.data(), LinearMode::Dense);
  if (debug) debug->record("vision_proj_in", {Nv, E}, gen.data());
  if (Nn == 0) return gen;

  // The embedding MLP runs once per distinct timestep (usually one for all
  // Nn tokens); each row is computed on its own, so broadcasting is exact.
  std::vector<float> distinct = g.noisy_timesteps;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const int64_t U = int64_t(distinct.size());
  const std::vector<float> sinusoid = timestep_sinusoid(distinct, config_.timestep_scale);  // [U, 256]
  std::vector<float> hidden = buffer(U, E), embedding = buffer(U, E);
  weights_.time_linear_1.forward(sinusoid.data(), U, hidden.data(), LinearMode::Dense);
  silu(hidden.data(), U * E);
  weights_.time_linear_2.forward(hidden.data(), U, embedding.data(), LinearMode::Dense);

  // Noisy token j (the (j / Hp·Wp)-th noisy frame f, spatial index s) sits at
  // packed row f·Hp·Wp + s.
  std::vector<float> temb;  // [Nn, E], only for the debug record
  if (debug) temb.resize(std::size_t(Nn * E));
  for (int64_t j = 0; j < Nn; ++j) {
    const float t = g.noisy_timesteps[std::size_t(j)];
    const float* row_embedding =
        embedding.data() + (std::lower_bound(distinct.begin(), distinct.end(), t) - distinct.begin()) * E;
    float* token = gen.data() + (g.noisy_frames[std::size_t(j / per_frame)] * per_frame + j % per_frame) * E;
    for (int64_t e = 0; e < E; ++e) token[e] += row_embedding[e];
    if (debug) std::copy_n(row_embedding, E, temb.data() + j * E);
  }
  if (debug) debug->record("timestep_embed", {Nn, E}, temb.data());
  return gen;
}

// gen: [Nv, E] in place through one decoder layer's generation half, which
// attends to [understanding keys; generation keys] without a mask.
void Cosmos3Transformer::generation_layer(int64_t k, std::vector<float>& gen, const UnderstandingLayerKV& und_kv,
                                          const RopeTables& rope, const ForwardGeometry& g, LinearMode mode) const {
  const Cosmos3Config& c = config_;
  const int64_t L = g.und_len, Nv = g.vision_tokens(), E = c.hidden_size, D = c.head_dim;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, KV = c.kv_width();
  const float eps = float(c.rms_norm_eps);
  const DecoderLayerWeights& layer = weights_.layers[std::size_t(k)];
  const AttentionWeights& a = layer.attention;

  std::vector<float> normed = buffer(Nv, E), q = buffer(Nv, c.q_width());
  std::vector<float> keys = buffer(L + Nv, KV), values = buffer(L + Nv, KV);  // [L + Nv, Hkv, D]
  std::copy(und_kv.keys.begin(), und_kv.keys.end(), keys.begin());
  std::copy(und_kv.values.begin(), und_kv.values.end(), values.begin());
  float* gen_keys = keys.data() + L * KV;

  rms_norm(gen.data(), Nv, E, layer.input_layernorm_moe_gen.data(), eps, norm_kind_, normed.data());
  a.add_q_proj.forward(normed.data(), Nv, q.data(), mode);
  a.add_k_proj.forward(normed.data(), Nv, gen_keys, mode);
  a.add_v_proj.forward(normed.data(), Nv, values.data() + L * KV, mode);
  rms_norm(q.data(), Nv * Hq, D, a.norm_added_q.data(), eps, norm_kind_, q.data());
  rms_norm(gen_keys, Nv * Hkv, D, a.norm_added_k.data(), eps, norm_kind_, gen_keys);
  apply_rotary(q.data(), Nv, Hq, D, rope.cos_row(L), rope.sin_row(L));
  apply_rotary(gen_keys, Nv, Hkv, D, rope.cos_row(L), rope.sin_row(L));

  std::vector<float> attended = buffer(Nv, c.q_width()), projected = buffer(Nv, E);
  attention_blocked({Nv, L + Nv, Hq, Hkv, D, false}, q.data(), keys.data(), values.data(), attended.data());
  a.to_add_out.forward(attended.data(), Nv, projected.data(), mode);
  add_in_place(gen, projected);
  rms_norm(gen.data(), Nv, E, layer.post_attention_layernorm_moe_gen.data(), eps, norm_kind_, normed.data());
  mlp(layer.mlp_moe_gen, normed.data(), Nv, projected.data(), mode);
  add_in_place(gen, projected);
}

HostTensor Cosmos3Transformer::forward(const ForwardInputs& in, LinearMode generation_mode, LinearMode reasoner_mode,
                                       ForwardDebug* debug) {
  check_tower_mode("generation", weights_.governed.generation_fp8, generation_mode);
  check_tower_mode("reasoner", weights_.governed.reasoner_fp8, reasoner_mode);
  const ForwardGeometry g = resolve_forward_geometry(in, config_);
  const int64_t E = config_.hidden_size, Nv = g.vision_tokens(), Nn = g.noisy_tokens(), S = g.sequence_length;

  const RopeTables rope = build_rope_tables(config_, in.position_ids.data(), S);
  if (debug) {
    const std::vector<float> inv_freq = rope_inv_freq(config_);
    debug->record("rope.inv_freq", {int64_t(inv_freq.size())}, inv_freq.data());
    debug->record("rope.cos", {S, config_.head_dim}, rope.cos.data());
    debug->record("rope.sin", {S, config_.head_dim}, rope.sin.data());
  }

  const std::shared_ptr<const UnderstandingKV> und = understanding(in, g, rope, reasoner_mode, debug);
  std::vector<float> gen = embed_vision(in, g, debug);  // [Nv, E]
  if (debug) debug->record("gen_embed", {Nv, E}, gen.data());
  for (int64_t k = 0; k < config_.num_hidden_layers; ++k) {
    generation_layer(k, gen, und->layers[std::size_t(k)], rope, g, generation_mode);
    if (debug) debug->record("gen_hidden." + std::to_string(k), {Nv, E}, gen.data());
  }
  rms_norm(gen.data(), Nv, E, weights_.norm_moe_gen.data(), float(config_.rms_norm_eps), norm_kind_, gen.data());
  if (debug) debug->record("gen_final_norm", {Nv, E}, gen.data());

  // Noisy frames' rows are contiguous per frame: gather them, then read out.
  const int64_t per_frame = g.grid.tokens_per_frame(), F = g.grid.features();
  std::vector<float> noisy_rows = buffer(Nn, E), packed = buffer(Nn, F);  // [Nn, E] → [Nn, p²C]
  for (std::size_t n = 0; n < g.noisy_frames.size(); ++n)
    std::copy_n(gen.data() + g.noisy_frames[n] * per_frame * E, per_frame * E,
                noisy_rows.data() + int64_t(n) * per_frame * E);
  if (Nn > 0) weights_.proj_out.forward(noisy_rows.data(), Nn, packed.data(), LinearMode::Dense);
  if (debug) debug->record("packed_pred", {Nn, F}, packed.data());

  const PatchGrid& grid = g.grid;
  return HostTensor{{1, grid.channels, grid.frames, grid.height, grid.width},
                    unpatchify(packed.data(), grid, g.noisy_frames)};
}

}  // namespace stepmix
