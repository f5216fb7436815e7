// One transformer forward, written once for float32 and bf16 activations
// (T = float or uint16_t bf16 bits) against the Backend seam: embeddings, the
// understanding K/V (cached), the generation layers, read-out.
//
// With bf16 activations every Linear takes and returns bf16. What stays
// float32, and why:
//  - the residual streams (und, gen): each layer adds a bf16 Linear output to
//    them; keeping the sum in float32 avoids a rounding per layer at the
//    cost of 4 instead of 2 bytes per element of one [rows, E] tensor;
//  - RMSNorm statistics and products, per-head q/k norm and rotary, fused and
//    rounded to bf16 once (the reference rounds after the norm and again after
//    each rotary product);
//  - softmax (kernels/attention.hpp), SiLU·up (rounded once);
//  - the timestep embedding (a tiny MLP on the host).
// So the bf16 path differs from the float32 one only by rounding the Linear
// inputs, Linear outputs, attention operands and softmax weights to bf16.
//
// Row-wise pieces run on the backend's threads with each row computed as a
// single thread would, so results are bit-identical for any thread count.
#include <algorithm>
#include <array>
#include <type_traits>

#include "core/numerics.hpp"
#include "model/embedding.hpp"
#include "model/transformer.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

template <class T>
constexpr bool kIsBf16 = std::is_same_v<T, uint16_t>;

template <class T>
class ForwardPass {
 public:
  ForwardPass(const Cosmos3Config& config, const Cosmos3Weights& weights, Backend& backend, UnderstandingCache& cache,
              ForwardWorkspace& ws, const ForwardOptions& options)
      : c_(config),
        w_(weights),
        b_(backend),
        cache_(cache),
        ws_(ws),
        opt_(options),
        norm_(config.hidden_act == HiddenAct::ReLU2 ? NormKind::Nemotron : NormKind::Standard),
        eps_(float(config.rms_norm_eps)) {}

  HostTensor run(const ForwardInputs& in);
  // The latent is read from, and the velocity written to, backend memory;
  // run() then returns an empty tensor.
  ForwardPass& resident(const float* latent, float* velocity) {
    resident_latent_ = latent;
    resident_velocity_ = velocity;
    return *this;
  }

 private:
  std::shared_ptr<const UnderstandingKV> understanding(const ForwardInputs& in);
  std::shared_ptr<const UnderstandingKV> run_understanding(const ForwardInputs& in);
  float* embed_vision(const ForwardInputs& in);
  void generation_layer(int64_t k, float* gen, const UnderstandingLayerKV& und_kv);
  void mlp(const MlpWeights& w, const T* x, int64_t rows, T* out, Precision precision);
  const float* read_out(const float* gen);

  // One Linear, or siblings reading the same x.
  void linear(const Linear& l, const T* x, int64_t rows, T* y, Precision p) {
    b_.linear(std::array<const Linear*, 1>{&l}, x, rows, std::array<T*, 1>{y}, p);
  }
  template <std::size_t N>
  void linears(const std::array<const Linear*, N>& ls, const T* x, int64_t rows, const std::array<T*, N>& ys,
               Precision p) {
    b_.linear(ls, x, rows, ys, p);
  }
  const float* weight(const std::vector<float>& host) { return b_.resident(host); }
  const float* cos_row(int64_t row) const { return rope_ + row * c_.head_dim; }
  const float* sin_row(int64_t row) const { return rope_ + (g_.sequence_length + row) * c_.head_dim; }

  // Debug records read backend memory back to the host, widening bf16.
  void record(const std::string& name, std::vector<int64_t> shape, const float* data);
  void record(const std::string& name, std::vector<int64_t> shape, const uint16_t* data);

  const Cosmos3Config& c_;
  const Cosmos3Weights& w_;
  Backend& b_;
  UnderstandingCache& cache_;
  ForwardWorkspace& ws_;
  const ForwardOptions& opt_;
  const NormKind norm_;
  const float eps_;
  ForwardGeometry g_;
  const float* rope_ = nullptr;  // [2, S, D]: cos rows, then sin rows
  const float* resident_latent_ = nullptr;  // [C, T, H, W] in backend memory, or null: in.latent
  float* resident_velocity_ = nullptr;      // [C, T, H, W] in backend memory, or null: returned
};

template <class T>
void ForwardPass<T>::record(const std::string& name, std::vector<int64_t> shape, const float* data) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> host(std::size_t(n), 0.0f);
  b_.download(host.data(), data, std::size_t(n) * sizeof(float));
  opt_.debug->record(name, std::move(shape), host.data());
}

template <class T>
void ForwardPass<T>::record(const std::string& name, std::vector<int64_t> shape, const uint16_t* data) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<uint16_t> bits(static_cast<std::size_t>(n));
  std::vector<float> host(static_cast<std::size_t>(n));
  b_.download(bits.data(), data, std::size_t(n) * sizeof(uint16_t));
  kernels::ref::widen_bf16(bits.data(), n, host.data());
  opt_.debug->record(name, std::move(shape), host.data());
}

// The understanding K/V for this prompt, reasoner precision and activation
// dtype, from the cache when possible; a debug call recomputes so that
// und_hidden.{k} are recorded.
template <class T>
std::shared_ptr<const UnderstandingKV> ForwardPass<T>::understanding(const ForwardInputs& in) {
  const int64_t L = g_.und_len, S = g_.sequence_length;
  UnderstandingKey key{in.input_ids, {}, opt_.reasoner, opt_.activations};
  key.positions.reserve(std::size_t(3 * L));
  for (int64_t axis = 0; axis < 3; ++axis)
    key.positions.insert(key.positions.end(), in.position_ids.begin() + axis * S,
                         in.position_ids.begin() + axis * S + L);
  if (!opt_.debug)
    if (auto cached = cache_.find(key)) return cached;
  auto kv = run_understanding(in);
  cache_.insert(std::move(key), kv);
  return kv;
}

// Text rows [0, L): embed → every layer's understanding half. Returns the
// keys/values [L, Hkv, D] the generation stream reads; records
// und_embed/und_hidden.{k}.
template <class T>
std::shared_ptr<const UnderstandingKV> ForwardPass<T>::run_understanding(const ForwardInputs& in) {
  const int64_t L = g_.und_len, E = c_.hidden_size, D = c_.head_dim;
  const int64_t Hq = c_.num_attention_heads, Hkv = c_.num_key_value_heads, KV = c_.kv_width();
  const Precision p = opt_.reasoner;

  float* und = ws_.get<float>(Slot::und, L * E);  // [L, E] float32 residual
  const std::vector<float> embedded = embed_text(w_.embed_tokens, in.input_ids, E);
  b_.upload(und, embedded.data(), embedded.size() * sizeof(float));
  if (opt_.debug) record("und_embed", {L, E}, und);

  auto kv = std::make_shared<UnderstandingKV>();
  T* normed = ws_.get<T>(Slot::normed, L * E);
  T* q = ws_.get<T>(Slot::q, L * c_.q_width());
  T* attended = ws_.get<T>(Slot::attended, L * c_.q_width());
  T* projected = ws_.get<T>(Slot::projected, L * E);
  for (int64_t k = 0; k < c_.num_hidden_layers; ++k) {
    const DecoderLayerWeights& layer = w_.layers[std::size_t(k)];
    const AttentionWeights& a = layer.attention;
    UnderstandingLayerKV layer_kv{b_.allocate(std::size_t(L * KV) * sizeof(T)),
                                  b_.allocate(std::size_t(L * KV) * sizeof(T))};
    T* keys = layer_kv.keys->as<T>();
    T* values = layer_kv.values->as<T>();

    b_.rms_norm(und, L, E, weight(layer.input_layernorm), eps_, norm_, normed);
    linears<3>({&a.to_q, &a.to_k, &a.to_v}, normed, L, {q, keys, values}, p);
    b_.head_norm_rotary(q, L, Hq, D, c_.qk_norm_for_text ? weight(a.norm_q) : nullptr, eps_, norm_, cos_row(0),
                        sin_row(0));
    // The generation stream may see differently normalised keys than the
    // understanding stream itself (only when qk_norm_for_text is off).
    const T* causal_keys = keys;
    if (c_.has_und_k_norm_for_gen()) {
      T* own_keys = ws_.get<T>(Slot::own_keys, L * KV);
      b_.copy(own_keys, keys, std::size_t(L * KV) * sizeof(T));
      b_.head_norm_rotary(own_keys, L, Hkv, D, nullptr, eps_, norm_, cos_row(0), sin_row(0));
      b_.head_norm_rotary(keys, L, Hkv, D, weight(a.k_norm_und_for_gen), eps_, norm_, cos_row(0), sin_row(0));
      causal_keys = own_keys;
    } else {
      b_.head_norm_rotary(keys, L, Hkv, D, c_.qk_norm_for_text ? weight(a.norm_k) : nullptr, eps_, norm_,
                          cos_row(0), sin_row(0));
    }
    b_.attention({L, L, Hq, Hkv, D, true}, q, causal_keys, values, attended);

    linear(a.to_out, attended, L, projected, p);
    b_.add_to_residual(und, projected, L * E);
    b_.rms_norm(und, L, E, weight(layer.post_attention_layernorm), eps_, norm_, normed);
    mlp(layer.mlp, normed, L, projected, p);
    b_.add_to_residual(und, projected, L * E);
    if (opt_.debug) record("und_hidden." + std::to_string(k), {L, E}, und);
    kv->layers.push_back(std::move(layer_kv));
  }
  return kv;
}

// x: [rows, E] → out: [rows, E]
template <class T>
void ForwardPass<T>::mlp(const MlpWeights& w, const T* x, int64_t rows, T* out, Precision p) {
  const int64_t I = c_.intermediate_size;
  T* up = ws_.get<T>(Slot::up, rows * I);
  if (w.gate_proj) {
    T* gate = ws_.get<T>(Slot::gate, rows * I);
    // up and gate read the same x: W8A8 quantizes it once when their s_x agree.
    linears<2>({&w.up_proj, &*w.gate_proj}, x, rows, {up, gate}, p);
    b_.silu_gate(gate, up, rows * I, up);
  } else {
    linear(w.up_proj, x, rows, up, p);
    b_.relu_squared(up, rows * I);
  }
  linear(w.down_proj, up, rows, out, p);
}

// Vision rows: patchify → proj_in, + timestep embedding on noisy frames, into
// the generation residual [Nv, E]. With bf16 activations the latent (the
// transformer input) is rounded to bf16 and proj_in runs on bf16. Records
// vision_proj_in, timestep_embed.
template <class T>
float* ForwardPass<T>::embed_vision(const ForwardInputs& in) {
  const int64_t E = c_.hidden_size, Nv = g_.vision_tokens(), Nn = g_.noisy_tokens();
  const int64_t per_frame = g_.grid.tokens_per_frame(), F = g_.grid.features();
  float* patches = ws_.get<float>(Slot::patches, Nv * F);  // [Nv, p²C]
  if (resident_latent_) {
    b_.patchify(resident_latent_, g_.grid, patches);
  } else {
    const std::vector<float> host_patches = patchify(in.latent.data.data(), g_.grid);
    b_.upload(patches, host_patches.data(), host_patches.size() * sizeof(float));
  }
  float* gen = ws_.get<float>(Slot::residual, Nv * E);  // [Nv, E]
  if constexpr (kIsBf16<T>) {
    uint16_t* patches_bf16 = ws_.get<uint16_t>(Slot::normed, Nv * F);
    uint16_t* projected = ws_.get<uint16_t>(Slot::projected, Nv * E);
    b_.round_to_bf16(patches, Nv * F, patches_bf16);
    linear(w_.proj_in, patches_bf16, Nv, projected, Precision::BF16);
    b_.widen_bf16(projected, Nv * E, gen);
  } else {
    linear(w_.proj_in, patches, Nv, gen, Precision::BF16);
  }
  if (opt_.debug) record("vision_proj_in", {Nv, E}, gen);
  if (Nn == 0) return gen;

  // The embedding MLP runs once per distinct timestep (usually one for all
  // Nn tokens), on the host; each row is computed on its own, so
  // broadcasting is exact.
  std::vector<float> distinct = g_.noisy_timesteps;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const int64_t U = int64_t(distinct.size());
  const std::vector<float> sinusoid = timestep_sinusoid(distinct, c_.timestep_scale);  // [U, 256]
  std::vector<float> hidden(std::size_t(U * E)), embedding(std::size_t(U * E));
  w_.time_linear_1.forward(sinusoid.data(), U, hidden.data(), Precision::BF16);
  kernels::ref::silu(hidden.data(), U * E);
  w_.time_linear_2.forward(hidden.data(), U, embedding.data(), Precision::BF16);
  float* table = ws_.get<float>(Slot::embedding, U * E);
  b_.upload(table, embedding.data(), embedding.size() * sizeof(float));

  // Noisy token j (the (j / Hp·Wp)-th noisy frame f, spatial index s) sits at
  // packed row f·Hp·Wp + s; runs of tokens of one frame with one timestep get
  // their embedding row in one call.
  std::vector<float> temb;  // [Nn, E], only for the debug record
  if (opt_.debug) temb.resize(std::size_t(Nn * E));
  auto row_of = [&](int64_t j) {
    const float t = g_.noisy_timesteps[std::size_t(j)];
    return std::lower_bound(distinct.begin(), distinct.end(), t) - distinct.begin();
  };
  for (int64_t j = 0; j < Nn;) {
    const int64_t u = row_of(j), frame_end = (j / per_frame + 1) * per_frame;
    int64_t end = j + 1;
    while (end < frame_end && row_of(end) == u) ++end;
    const int64_t first_row = g_.noisy_frames[std::size_t(j / per_frame)] * per_frame + j % per_frame;
    b_.add_row(gen + first_row * E, end - j, E, table + u * E);
    if (opt_.debug)
      for (int64_t r = j; r < end; ++r) std::copy_n(embedding.data() + u * E, E, temb.data() + r * E);
    j = end;
  }
  if (opt_.debug) opt_.debug->record("timestep_embed", {Nn, E}, temb.data());
  return gen;
}

// gen: [Nv, E] in place through one decoder layer's generation half, which
// attends to [understanding keys; generation keys] without a mask.
template <class T>
void ForwardPass<T>::generation_layer(int64_t k, float* gen, const UnderstandingLayerKV& und_kv) {
  const int64_t L = g_.und_len, Nv = g_.vision_tokens(), E = c_.hidden_size, D = c_.head_dim;
  const int64_t Hq = c_.num_attention_heads, Hkv = c_.num_key_value_heads, KV = c_.kv_width();
  const Precision p = opt_.generation;
  const DecoderLayerWeights& layer = w_.layers[std::size_t(k)];
  const AttentionWeights& a = layer.attention;

  T* normed = ws_.get<T>(Slot::normed, Nv * E);
  T* q = ws_.get<T>(Slot::q, Nv * c_.q_width());
  T* keys = ws_.get<T>(Slot::keys, (L + Nv) * KV);  // [L + Nv, Hkv, D]
  T* values = ws_.get<T>(Slot::values, (L + Nv) * KV);
  b_.copy(keys, und_kv.keys->data(), std::size_t(L * KV) * sizeof(T));
  b_.copy(values, und_kv.values->data(), std::size_t(L * KV) * sizeof(T));
  T* gen_keys = keys + L * KV;

  b_.rms_norm(gen, Nv, E, weight(layer.input_layernorm_moe_gen), eps_, norm_, normed);
  linears<3>({&a.add_q_proj, &a.add_k_proj, &a.add_v_proj}, normed, Nv, {q, gen_keys, values + L * KV}, p);
  b_.head_norm_rotary(q, Nv, Hq, D, weight(a.norm_added_q), eps_, norm_, cos_row(L), sin_row(L));
  b_.head_norm_rotary(gen_keys, Nv, Hkv, D, weight(a.norm_added_k), eps_, norm_, cos_row(L), sin_row(L));

  T* attended = ws_.get<T>(Slot::attended, Nv * c_.q_width());
  T* projected = ws_.get<T>(Slot::projected, Nv * E);
  b_.attention({Nv, L + Nv, Hq, Hkv, D, false}, q, keys, values, attended);
  linear(a.to_add_out, attended, Nv, projected, p);
  b_.add_to_residual(gen, projected, Nv * E);
  b_.rms_norm(gen, Nv, E, weight(layer.post_attention_layernorm_moe_gen), eps_, norm_, normed);
  mlp(layer.mlp_moe_gen, normed, Nv, projected, p);
  b_.add_to_residual(gen, projected, Nv * E);
}

// gen: [Nv, E] → final norm → noisy frames' rows (contiguous per frame) →
// proj_out: packed [Nn, p²C] float32 in backend memory. Records
// gen_final_norm and packed_pred.
template <class T>
const float* ForwardPass<T>::read_out(const float* gen) {
  const int64_t E = c_.hidden_size, Nv = g_.vision_tokens(), Nn = g_.noisy_tokens();
  const int64_t per_frame = g_.grid.tokens_per_frame(), F = g_.grid.features();
  T* normed = ws_.get<T>(Slot::normed, Nv * E);
  b_.rms_norm(gen, Nv, E, weight(w_.norm_moe_gen), eps_, norm_, normed);
  if (opt_.debug) record("gen_final_norm", {Nv, E}, normed);
  T* noisy_rows = ws_.get<T>(Slot::attended, Nn * E);
  for (std::size_t n = 0; n < g_.noisy_frames.size(); ++n)
    b_.copy(noisy_rows + int64_t(n) * per_frame * E, normed + g_.noisy_frames[n] * per_frame * E,
            std::size_t(per_frame * E) * sizeof(T));

  float* out = ws_.get<float>(Slot::output, Nn * F);  // [Nn, p²C]
  if constexpr (kIsBf16<T>) {
    uint16_t* packed_bf16 = ws_.get<uint16_t>(Slot::projected, Nn * F);
    if (Nn > 0) linear(w_.proj_out, noisy_rows, Nn, packed_bf16, Precision::BF16);
    b_.widen_bf16(packed_bf16, Nn * F, out);
  } else {
    if (Nn > 0) linear(w_.proj_out, noisy_rows, Nn, out, Precision::BF16);
  }
  if (opt_.debug) record("packed_pred", {Nn, F}, out);
  return out;
}

template <class T>
HostTensor ForwardPass<T>::run(const ForwardInputs& in) {
  g_ = resolve_forward_geometry(in, c_, resident_latent_ != nullptr);
  const int64_t E = c_.hidden_size, Nv = g_.vision_tokens(), S = g_.sequence_length, D = c_.head_dim;

  const RopeTables tables = build_rope_tables(c_, in.position_ids.data(), S);
  float* rope = ws_.get<float>(Slot::rope, 2 * S * D);
  b_.upload(rope, tables.cos.data(), tables.cos.size() * sizeof(float));
  b_.upload(rope + S * D, tables.sin.data(), tables.sin.size() * sizeof(float));
  rope_ = rope;
  if (opt_.debug) {
    const std::vector<float> inv_freq = rope_inv_freq(c_);
    opt_.debug->record("rope.inv_freq", {int64_t(inv_freq.size())}, inv_freq.data());
    opt_.debug->record("rope.cos", {S, D}, tables.cos.data());
    opt_.debug->record("rope.sin", {S, D}, tables.sin.data());
  }

  const std::shared_ptr<const UnderstandingKV> und = understanding(in);
  float* gen = embed_vision(in);  // [Nv, E]
  if (opt_.debug) record("gen_embed", {Nv, E}, gen);
  for (int64_t k = 0; k < c_.num_hidden_layers; ++k) {
    generation_layer(k, gen, und->layers[std::size_t(k)]);
    if (opt_.debug) record("gen_hidden." + std::to_string(k), {Nv, E}, gen);
  }
  const float* packed = read_out(gen);  // [Nn, p²C]
  const PatchGrid& grid = g_.grid;
  if (resident_velocity_) {
    b_.unpatchify(packed, grid, g_.noisy_frames, resident_velocity_);
    return {};
  }
  std::vector<float> host(std::size_t(g_.noisy_tokens() * grid.features()));
  b_.download(host.data(), packed, host.size() * sizeof(float));
  return HostTensor{{1, grid.channels, grid.frames, grid.height, grid.width},
                    unpatchify(host.data(), grid, g_.noisy_frames)};
}

}  // namespace

HostTensor Cosmos3Transformer::forward(const ForwardInputs& in, const ForwardOptions& options) {
  check_tower_precision("generation", weights_.governed.generation_fp8, options.generation);
  check_tower_precision("reasoner", weights_.governed.reasoner_fp8, options.reasoner);
  if (options.activations == ActivationDType::BF16)
    return ForwardPass<uint16_t>(config_, weights_, *backend_, understanding_cache_, workspace_, options).run(in);
  return ForwardPass<float>(config_, weights_, *backend_, understanding_cache_, workspace_, options).run(in);
}

void Cosmos3Transformer::forward_resident(const ForwardInputs& in, const float* latent, float* velocity,
                                          const ForwardOptions& options) {
  if (!latent || !velocity) throw Error("model", "forward_resident: null latent or velocity buffer");
  check_tower_precision("generation", weights_.governed.generation_fp8, options.generation);
  check_tower_precision("reasoner", weights_.governed.reasoner_fp8, options.reasoner);
  if (options.activations == ActivationDType::BF16) {
    ForwardPass<uint16_t>(config_, weights_, *backend_, understanding_cache_, workspace_, options)
        .resident(latent, velocity)
        .run(in);
  } else {
    ForwardPass<float>(config_, weights_, *backend_, understanding_cache_, workspace_, options)
        .resident(latent, velocity)
        .run(in);
  }
}

}  // namespace stepmix
