// Orchestration of one forward: embeddings, the understanding K/V (cached),
// the generation layers in the chosen activation dtype, read-out. The layers
// themselves live in transformer_layers_{f32,bf16}.cpp.
#include "model/transformer.hpp"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/numerics.hpp"
#include "model/embedding.hpp"
#include "stepmix/error.hpp"

namespace stepmix {

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

std::vector<float> Cosmos3Transformer::embed_text(const ForwardInputs& in) const {
  const int64_t L = int64_t(in.input_ids.size()), E = config_.hidden_size;
  std::vector<float> und(std::size_t(L * E));  // [L, E]
  const TensorView& table = weights_.embed_tokens;
  for (int64_t i = 0; i < L; ++i) {
    const int64_t row = in.input_ids[std::size_t(i)] * E;
    for (int64_t e = 0; e < E; ++e)
      und[std::size_t(i * E + e)] =
          table.dtype == DType::BF16 ? bf16_to_float(table.as<uint16_t>()[row + e]) : table.as<float>()[row + e];
  }
  return und;
}

// The understanding K/V for this prompt, reasoner precision and activation
// dtype, from the cache when possible; a debug call recomputes so that
// und_hidden.{k} are recorded.
std::shared_ptr<const UnderstandingKV> Cosmos3Transformer::understanding(const ForwardInputs& in,
                                                                         const ForwardGeometry& g,
                                                                         const RopeTables& rope, LinearMode mode,
                                                                         ForwardDebug* debug) {
  const int64_t L = g.und_len, S = g.sequence_length;
  UnderstandingKey key{in.input_ids, {}, mode, activation_dtype_};
  key.positions.reserve(std::size_t(3 * L));
  for (int64_t axis = 0; axis < 3; ++axis)
    key.positions.insert(key.positions.end(), in.position_ids.begin() + axis * S,
                         in.position_ids.begin() + axis * S + L);
  if (!debug)
    if (auto cached = understanding_cache_.find(key)) return cached;
  auto kv = activation_dtype_ == ActivationDType::BF16 ? run_understanding_bf16(in, rope, mode, debug)
                                                       : run_understanding_f32(in, rope, mode, debug);
  understanding_cache_.insert(std::move(key), kv);
  return kv;
}

// Vision rows: patchify → proj_in, + timestep embedding on noisy frames. With
// bf16 activations the latent (the transformer input) is rounded to bf16 and
// proj_in runs on bf16; the timestep embedding stays float32 (spec §4).
float* Cosmos3Transformer::embed_vision(const ForwardInputs& in, const ForwardGeometry& g, ForwardDebug* debug) {
  const int64_t E = config_.hidden_size, Nv = g.vision_tokens(), Nn = g.noisy_tokens();
  const int64_t per_frame = g.grid.tokens_per_frame(), F = g.grid.features();
  const std::vector<float> patches = patchify(in.latent.data.data(), g.grid);  // [Nv, p²C]
  float* gen = workspace_.residual.get(Nv * E);                                 // [Nv, E]
  if (activation_dtype_ == ActivationDType::BF16) {
    uint16_t* patches_bf16 = workspace_.normed_bf16.get(Nv * F);
    uint16_t* projected = workspace_.projected_bf16.get(Nv * E);
    round_to_bf16(patches.data(), Nv * F, patches_bf16);
    weights_.proj_in.forward(patches_bf16, Nv, projected, LinearMode::Dense);
    widen_bf16(projected, Nv * E, gen);
  } else {
    weights_.proj_in.forward(patches.data(), Nv, gen, LinearMode::Dense);
  }
  if (debug) debug->record("vision_proj_in", {Nv, E}, gen);
  if (Nn == 0) return gen;

  // The embedding MLP runs once per distinct timestep (usually one for all
  // Nn tokens); each row is computed on its own, so broadcasting is exact.
  std::vector<float> distinct = g.noisy_timesteps;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const int64_t U = int64_t(distinct.size());
  const std::vector<float> sinusoid = timestep_sinusoid(distinct, config_.timestep_scale);  // [U, 256]
  std::vector<float> hidden(std::size_t(U * E)), embedding(std::size_t(U * E));
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
    float* token = gen + (g.noisy_frames[std::size_t(j / per_frame)] * per_frame + j % per_frame) * E;
    for (int64_t e = 0; e < E; ++e) token[e] += row_embedding[e];
    if (debug) std::copy_n(row_embedding, E, temb.data() + j * E);
  }
  if (debug) debug->record("timestep_embed", {Nn, E}, temb.data());
  return gen;
}

// gen: [Nv, E] → final norm → noisy frames' rows (contiguous per frame) →
// proj_out: [Nn, p²C]. Records gen_final_norm and packed_pred.
std::vector<float> Cosmos3Transformer::read_out(const float* gen, const ForwardGeometry& g, ForwardDebug* debug) {
  const int64_t E = config_.hidden_size, Nv = g.vision_tokens(), Nn = g.noisy_tokens();
  const int64_t per_frame = g.grid.tokens_per_frame(), F = g.grid.features();
  const float eps = float(config_.rms_norm_eps);
  std::vector<float> packed(std::size_t(Nn * F));  // [Nn, p²C]
  if (activation_dtype_ == ActivationDType::BF16) {
    uint16_t* normed = workspace_.normed_bf16.get(Nv * E);
    uint16_t* noisy_rows = workspace_.attended_bf16.get(Nn * E);
    uint16_t* packed_bf16 = workspace_.projected_bf16.get(Nn * F);
    rms_norm_to_bf16(gen, Nv, E, weights_.norm_moe_gen.data(), eps, norm_kind_, normed);
    if (debug) {
      std::vector<float> widened(std::size_t(Nv * E));
      widen_bf16(normed, Nv * E, widened.data());
      debug->record("gen_final_norm", {Nv, E}, widened.data());
    }
    for (std::size_t n = 0; n < g.noisy_frames.size(); ++n)
      std::copy_n(normed + g.noisy_frames[n] * per_frame * E, per_frame * E, noisy_rows + int64_t(n) * per_frame * E);
    if (Nn > 0) weights_.proj_out.forward(noisy_rows, Nn, packed_bf16, LinearMode::Dense);
    widen_bf16(packed_bf16, Nn * F, packed.data());
  } else {
    float* normed = workspace_.normed.get(Nv * E);
    float* noisy_rows = workspace_.attended.get(Nn * E);
    rms_norm(gen, Nv, E, weights_.norm_moe_gen.data(), eps, norm_kind_, normed);
    if (debug) debug->record("gen_final_norm", {Nv, E}, normed);
    for (std::size_t n = 0; n < g.noisy_frames.size(); ++n)
      std::copy_n(normed + g.noisy_frames[n] * per_frame * E, per_frame * E, noisy_rows + int64_t(n) * per_frame * E);
    if (Nn > 0) weights_.proj_out.forward(noisy_rows, Nn, packed.data(), LinearMode::Dense);
  }
  if (debug) debug->record("packed_pred", {Nn, F}, packed.data());
  return packed;
}

HostTensor Cosmos3Transformer::forward(const ForwardInputs& in, LinearMode generation_mode, LinearMode reasoner_mode,
                                       ForwardDebug* debug) {
  check_tower_mode("generation", weights_.governed.generation_fp8, generation_mode);
  check_tower_mode("reasoner", weights_.governed.reasoner_fp8, reasoner_mode);
  const ForwardGeometry g = resolve_forward_geometry(in, config_);
  const int64_t E = config_.hidden_size, Nv = g.vision_tokens(), S = g.sequence_length;

  const RopeTables rope = build_rope_tables(config_, in.position_ids.data(), S);
  if (debug) {
    const std::vector<float> inv_freq = rope_inv_freq(config_);
    debug->record("rope.inv_freq", {int64_t(inv_freq.size())}, inv_freq.data());
    debug->record("rope.cos", {S, config_.head_dim}, rope.cos.data());
    debug->record("rope.sin", {S, config_.head_dim}, rope.sin.data());
  }

  const std::shared_ptr<const UnderstandingKV> und = understanding(in, g, rope, reasoner_mode, debug);
  float* gen = embed_vision(in, g, debug);  // [Nv, E]
  if (debug) debug->record("gen_embed", {Nv, E}, gen);
  for (int64_t k = 0; k < config_.num_hidden_layers; ++k) {
    const UnderstandingLayerKV& und_kv = und->layers[std::size_t(k)];
    if (activation_dtype_ == ActivationDType::BF16)
      generation_layer_bf16(k, gen, und_kv, rope, g, generation_mode);
    else
      generation_layer_f32(k, gen, und_kv, rope, g, generation_mode);
    if (debug) debug->record("gen_hidden." + std::to_string(k), {Nv, E}, gen);
  }
  const std::vector<float> packed = read_out(gen, g, debug);
  const PatchGrid& grid = g.grid;
  return HostTensor{{1, grid.channels, grid.frames, grid.height, grid.width},
                    unpatchify(packed.data(), grid, g.noisy_frames)};
}

}  // namespace stepmix
