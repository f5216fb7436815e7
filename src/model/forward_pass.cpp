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
//  - the timestep embedding (a tiny MLP, Backend::timestep_mlp).
// So the bf16 path differs from the float32 one only by rounding the Linear
// inputs, Linear outputs, attention operands and softmax weights to bf16.
//
// A call may carry several samples (CFG: the conditional and unconditional
// pass of a step). Their vision rows are stacked, [R = Σ Nv, ·], through every
// Linear and row-wise operation, so each weight is read once per call; rotary,
// attention (each sample against its own understanding K/V) and the read-out
// run per sample. Every row of a stacked operation is computed exactly as it
// is alone (GEMM rows do not depend on M in any kernel variant, the pointwise
// kernels are row- or element-wise), so a batch returns, bit for bit, what
// the samples return one at a time (tests/model/forward_batch_test.cpp).
// A resident call (the denoising loop on a device backend) does the same for
// samples reading one latent in backend memory, each writing its velocity to
// a buffer of its own (tests/model/forward_resident_test.cpp).
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

// One sample of a call and where its rows sit in the stacked buffers.
struct Sample {
  const ForwardInputs* in = nullptr;
  ForwardGeometry g;
  int64_t row0 = 0;        // first of its Nv rows in the generation stream
  int64_t noisy_row0 = 0;  // first of its Nn rows in the stacked read-out
  int64_t kv_row0 = 0;     // first of its L + Nv rows in the keys/values slots
  std::shared_ptr<const ResidentRope> rope;  // its [2, S, D] tables (model/rope_cache.hpp)
  float* velocity = nullptr;                 // [C, T, H, W] in backend memory, or null: returned
  std::shared_ptr<const UnderstandingKV> und;

  int64_t L() const { return g.und_len; }
  int64_t Nv() const { return g.vision_tokens(); }
  int64_t Nn() const { return g.noisy_tokens(); }
};

template <class T>
class ForwardPass {
 public:
  ForwardPass(const Cosmos3Config& config, const Cosmos3Weights& weights, Backend& backend, UnderstandingCache& cache,
              RopeCache& rope_cache, ForwardWorkspace& ws, const ForwardOptions& options)
      : c_(config),
        w_(weights),
        b_(backend),
        cache_(cache),
        rope_cache_(rope_cache),
        ws_(ws),
        opt_(options),
        norm_(config.hidden_act == HiddenAct::ReLU2 ? NormKind::Nemotron : NormKind::Standard),
        eps_(float(config.rms_norm_eps)) {}

  std::vector<HostTensor> run(std::span<const ForwardInputs* const> inputs);
  // Every sample reads the one latent from backend memory and writes its
  // velocity to its own buffer there (velocities[i] for inputs[i]); run()
  // then returns no tensor.
  ForwardPass& resident(const float* latent, std::span<float* const> velocities) {
    resident_latent_ = latent;
    resident_velocities_ = velocities;
    return *this;
  }

 private:
  void prepare(std::span<const ForwardInputs* const> inputs);
  std::shared_ptr<const UnderstandingKV> understanding(const Sample& s);
  std::shared_ptr<const UnderstandingKV> run_understanding(const Sample& s);
  float* embed_vision();
  void add_timestep_embeddings(float* gen);
  void generation_layer(int64_t k, float* gen);
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
  const float* cos_row(const Sample& s, int64_t row) const { return s.rope->cos() + row * c_.head_dim; }
  const float* sin_row(const Sample& s, int64_t row) const { return s.rope->sin() + row * c_.head_dim; }

  // Debug records read backend memory back to the host, widening bf16.
  void record(const std::string& name, std::vector<int64_t> shape, const float* data);
  void record(const std::string& name, std::vector<int64_t> shape, const uint16_t* data);

  const Cosmos3Config& c_;
  const Cosmos3Weights& w_;
  Backend& b_;
  UnderstandingCache& cache_;
  RopeCache& rope_cache_;
  ForwardWorkspace& ws_;
  const ForwardOptions& opt_;
  const NormKind norm_;
  const float eps_;
  std::vector<Sample> samples_;
  int64_t rows_ = 0;        // R = Σ Nv
  int64_t noisy_rows_ = 0;  // Σ Nn
  int64_t kv_rows_ = 0;     // Σ (L + Nv)
  const float* resident_latent_ = nullptr;     // [C, T, H, W] in backend memory, or null: the inputs' latents
  std::span<float* const> resident_velocities_;  // one per sample, or empty: returned
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
std::shared_ptr<const UnderstandingKV> ForwardPass<T>::understanding(const Sample& s) {
  const int64_t L = s.L(), S = s.g.sequence_length;
  UnderstandingKey key{s.in->input_ids, {}, opt_.reasoner, opt_.activations};
  key.positions.reserve(std::size_t(3 * L));
  for (int64_t axis = 0; axis < 3; ++axis)
    key.positions.insert(key.positions.end(), s.in->position_ids.begin() + axis * S,
                         s.in->position_ids.begin() + axis * S + L);
  if (!opt_.debug)
    if (auto cached = cache_.find(key)) return cached;
  auto kv = run_understanding(s);
  cache_.insert(std::move(key), kv);
  return kv;
}

// Text rows [0, L) of one sample: embed → every layer's understanding half.
// Returns the keys/values [L, Hkv, D] the generation stream reads; records
// und_embed/und_hidden.{k}.
template <class T>
std::shared_ptr<const UnderstandingKV> ForwardPass<T>::run_understanding(const Sample& s) {
  const int64_t L = s.L(), E = c_.hidden_size, D = c_.head_dim;
  const int64_t Hq = c_.num_attention_heads, Hkv = c_.num_key_value_heads, KV = c_.kv_width();
  const Precision p = opt_.reasoner;

  float* und = ws_.get<float>(Slot::und, L * E);  // [L, E] float32 residual
  const std::vector<float> embedded = embed_text(w_.embed_tokens, s.in->input_ids, E);
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
    b_.head_norm_rotary(q, L, Hq, D, c_.qk_norm_for_text ? weight(a.norm_q) : nullptr, eps_, norm_, cos_row(s, 0),
                        sin_row(s, 0));
    // The generation stream may see differently normalised keys than the
    // understanding stream itself (only when qk_norm_for_text is off).
    const T* causal_keys = keys;
    if (c_.has_und_k_norm_for_gen()) {
      T* own_keys = ws_.get<T>(Slot::own_keys, L * KV);
      b_.copy(own_keys, keys, std::size_t(L * KV) * sizeof(T));
      b_.head_norm_rotary(own_keys, L, Hkv, D, nullptr, eps_, norm_, cos_row(s, 0), sin_row(s, 0));
      b_.head_norm_rotary(keys, L, Hkv, D, weight(a.k_norm_und_for_gen), eps_, norm_, cos_row(s, 0), sin_row(s, 0));
      causal_keys = own_keys;
    } else {
      b_.head_norm_rotary(keys, L, Hkv, D, c_.qk_norm_for_text ? weight(a.norm_k) : nullptr, eps_, norm_,
                          cos_row(s, 0), sin_row(s, 0));
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

// Vision rows of every sample: patchify → proj_in (stacked), + timestep
// embedding on noisy frames, into the generation residual [R, E]. With bf16
// activations the latent (the transformer input) is rounded to bf16 and
// proj_in runs on bf16. Records vision_proj_in, timestep_embed.
template <class T>
float* ForwardPass<T>::embed_vision() {
  const int64_t E = c_.hidden_size, R = rows_, F = samples_.front().g.grid.features();
  float* patches = ws_.get<float>(Slot::patches, R * F);
  for (const Sample& s : samples_) {
    if (resident_latent_) {
      b_.patchify(resident_latent_, s.g.grid, patches + s.row0 * F);
      continue;
    }
    const std::vector<float> host_patches = patchify(s.in->latent.data.data(), s.g.grid);  // [Nv, p²C]
    b_.upload(patches + s.row0 * F, host_patches.data(), host_patches.size() * sizeof(float));
  }
  float* gen = ws_.get<float>(Slot::residual, R * E);  // [R, E]
  if constexpr (kIsBf16<T>) {
    uint16_t* patches_bf16 = ws_.get<uint16_t>(Slot::normed, R * F);
    uint16_t* projected = ws_.get<uint16_t>(Slot::projected, R * E);
    b_.round_to_bf16(patches, R * F, patches_bf16);
    linear(w_.proj_in, patches_bf16, R, projected, Precision::BF16);
    b_.widen_bf16(projected, R * E, gen);
  } else {
    linear(w_.proj_in, patches, R, gen, Precision::BF16);
  }
  if (opt_.debug) record("vision_proj_in", {R, E}, gen);
  add_timestep_embeddings(gen);
  return gen;
}

// gen: [R, E], every sample's rows. Noisy tokens get the embedding of their
// timestep. The MLP runs once per call, on the distinct timesteps of all
// samples (usually one: the two CFG passes of a step share it), in backend
// memory; each of its rows is computed on its own, so sharing and
// broadcasting are exact.
template <class T>
void ForwardPass<T>::add_timestep_embeddings(float* gen) {
  const int64_t E = c_.hidden_size;
  std::vector<float> distinct;
  for (const Sample& s : samples_)
    distinct.insert(distinct.end(), s.g.noisy_timesteps.begin(), s.g.noisy_timesteps.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const int64_t U = int64_t(distinct.size());
  if (U == 0) return;
  const std::vector<float> sinusoid = timestep_sinusoid(distinct, c_.timestep_scale);  // [U, 256]
  float* sinusoid_rows = ws_.get<float>(Slot::time_sinusoid, U * kTimestepChannels);
  b_.upload(sinusoid_rows, sinusoid.data(), sinusoid.size() * sizeof(float));
  float* hidden = ws_.get<float>(Slot::time_hidden, U * E);
  float* table = ws_.get<float>(Slot::embedding, U * E);  // [U, E]
  b_.timestep_mlp(w_.time_linear_1, w_.time_linear_2, sinusoid_rows, U, hidden, table);
  std::vector<float> host_table;  // only for the debug record
  if (opt_.debug) {
    host_table.resize(std::size_t(U * E));
    b_.download(host_table.data(), table, host_table.size() * sizeof(float));
  }

  for (const Sample& s : samples_) {
    const int64_t Nn = s.Nn(), per_frame = s.g.grid.tokens_per_frame();
    float* rows = gen + s.row0 * E;  // this sample's [Nv, E]
    auto row_of = [&](int64_t j) {
      const float t = s.g.noisy_timesteps[std::size_t(j)];
      return std::lower_bound(distinct.begin(), distinct.end(), t) - distinct.begin();
    };
    // Noisy token j (the (j / Hp·Wp)-th noisy frame f, spatial index s)
    // sits at packed row f·Hp·Wp + s; runs of tokens of one frame with one
    // timestep get their embedding row in one call.
    for (int64_t j = 0; j < Nn;) {
      const int64_t u = row_of(j), frame_end = (j / per_frame + 1) * per_frame;
      int64_t end = j + 1;
      while (end < frame_end && row_of(end) == u) ++end;
      const int64_t first_row = s.g.noisy_frames[std::size_t(j / per_frame)] * per_frame + j % per_frame;
      b_.add_row(rows + first_row * E, end - j, E, table + u * E);
      j = end;
    }
    if (opt_.debug && Nn > 0) {
      std::vector<float> temb(std::size_t(Nn * E));  // [Nn, E]
      for (int64_t j = 0; j < Nn; ++j) std::copy_n(host_table.data() + row_of(j) * E, E, temb.data() + j * E);
      opt_.debug->record("timestep_embed", {Nn, E}, temb.data());
    }
  }
}

// gen: [R, E] in place through one decoder layer's generation half; each
// sample's rows attend to [its understanding keys; its generation keys]
// without a mask.
template <class T>
void ForwardPass<T>::generation_layer(int64_t k, float* gen) {
  const int64_t R = rows_, E = c_.hidden_size, D = c_.head_dim;
  const int64_t Hq = c_.num_attention_heads, Hkv = c_.num_key_value_heads, KV = c_.kv_width(), QW = c_.q_width();
  const Precision p = opt_.generation;
  const DecoderLayerWeights& layer = w_.layers[std::size_t(k)];
  const AttentionWeights& a = layer.attention;
  const bool single = samples_.size() == 1;

  T* normed = ws_.get<T>(Slot::normed, R * E);
  T* q = ws_.get<T>(Slot::q, R * QW);
  T* keys = ws_.get<T>(Slot::keys, kv_rows_ * KV);  // per sample [L + Nv, Hkv, D]
  T* values = ws_.get<T>(Slot::values, kv_rows_ * KV);
  // One sample: k/v land straight behind its understanding rows. A batch:
  // stacked [R, KV] first, then each sample's rows move to its own keys.
  const int64_t L0 = samples_.front().L();
  T* gen_keys = single ? keys + L0 * KV : ws_.get<T>(Slot::gen_keys, R * KV);
  T* gen_values = single ? values + L0 * KV : ws_.get<T>(Slot::gen_values, R * KV);

  b_.rms_norm(gen, R, E, weight(layer.input_layernorm_moe_gen), eps_, norm_, normed);
  linears<3>({&a.add_q_proj, &a.add_k_proj, &a.add_v_proj}, normed, R, {q, gen_keys, gen_values}, p);

  T* attended = ws_.get<T>(Slot::attended, R * QW);
  T* projected = ws_.get<T>(Slot::projected, R * E);
  for (const Sample& s : samples_) {
    const int64_t L = s.L(), Nv = s.Nv();
    const UnderstandingLayerKV& und_kv = s.und->layers[std::size_t(k)];
    T* q_s = q + s.row0 * QW;
    T* k_s = gen_keys + s.row0 * KV;
    b_.head_norm_rotary(q_s, Nv, Hq, D, weight(a.norm_added_q), eps_, norm_, cos_row(s, L), sin_row(s, L));
    b_.head_norm_rotary(k_s, Nv, Hkv, D, weight(a.norm_added_k), eps_, norm_, cos_row(s, L), sin_row(s, L));
    T* keys_s = keys + s.kv_row0 * KV;
    T* values_s = values + s.kv_row0 * KV;
    b_.copy(keys_s, und_kv.keys->data(), std::size_t(L * KV) * sizeof(T));
    b_.copy(values_s, und_kv.values->data(), std::size_t(L * KV) * sizeof(T));
    if (!single) {
      b_.copy(keys_s + L * KV, k_s, std::size_t(Nv * KV) * sizeof(T));
      b_.copy(values_s + L * KV, gen_values + s.row0 * KV, std::size_t(Nv * KV) * sizeof(T));
    }
    b_.attention({Nv, L + Nv, Hq, Hkv, D, false}, q_s, keys_s, values_s, attended + s.row0 * QW);
  }
  linear(a.to_add_out, attended, R, projected, p);
  b_.add_to_residual(gen, projected, R * E);
  b_.rms_norm(gen, R, E, weight(layer.post_attention_layernorm_moe_gen), eps_, norm_, normed);
  mlp(layer.mlp_moe_gen, normed, R, projected, p);
  b_.add_to_residual(gen, projected, R * E);
}

// gen: [R, E] → final norm → each sample's noisy frames' rows (contiguous per
// frame), stacked → proj_out: packed [Σ Nn, p²C] float32 in backend memory.
// Records gen_final_norm and packed_pred.
template <class T>
const float* ForwardPass<T>::read_out(const float* gen) {
  const int64_t E = c_.hidden_size, R = rows_, Nn = noisy_rows_, F = samples_.front().g.grid.features();
  T* normed = ws_.get<T>(Slot::normed, R * E);
  b_.rms_norm(gen, R, E, weight(w_.norm_moe_gen), eps_, norm_, normed);
  if (opt_.debug) record("gen_final_norm", {R, E}, normed);
  T* noisy_rows = ws_.get<T>(Slot::attended, Nn * E);
  for (const Sample& s : samples_) {
    const int64_t per_frame = s.g.grid.tokens_per_frame();
    for (std::size_t n = 0; n < s.g.noisy_frames.size(); ++n)
      b_.copy(noisy_rows + (s.noisy_row0 + int64_t(n) * per_frame) * E,
              normed + (s.row0 + s.g.noisy_frames[n] * per_frame) * E, std::size_t(per_frame * E) * sizeof(T));
  }

  float* out = ws_.get<float>(Slot::output, Nn * F);  // [Σ Nn, p²C]
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

// Geometry, stacked offsets and rotary tables of every sample. The tables
// come from the transformer's rope cache: built and uploaded once per
// distinct set of position ids, not at every step.
template <class T>
void ForwardPass<T>::prepare(std::span<const ForwardInputs* const> inputs) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const ForwardInputs* in = inputs[i];
    Sample s;
    s.in = in;
    s.g = resolve_forward_geometry(*in, c_, resident_latent_ != nullptr);
    s.row0 = rows_;
    s.noisy_row0 = noisy_rows_;
    s.kv_row0 = kv_rows_;
    if (resident_latent_) s.velocity = resident_velocities_[i];
    rows_ += s.Nv();
    noisy_rows_ += s.Nn();
    kv_rows_ += s.L() + s.Nv();
    if (!samples_.empty() && s.g.grid.features() != samples_.front().g.grid.features())
      throw Error("model", "a batched forward needs one patch size and channel count for every sample");
    if (resident_latent_ && !samples_.empty() && in->latent.shape != samples_.front().in->latent.shape)
      throw Error("model", "forward_resident: every sample reads the one latent, so their latent shapes must agree");
    samples_.push_back(std::move(s));
  }
  for (Sample& s : samples_) {
    if (!opt_.debug) {
      s.rope = rope_cache_.get(c_, b_, s.in->position_ids);
      continue;
    }
    RopeTables host;  // debug records are host tables
    s.rope = rope_cache_.get(c_, b_, s.in->position_ids, &host);
    const int64_t S = s.g.sequence_length, D = c_.head_dim;
    const std::vector<float> inv_freq = rope_inv_freq(c_);
    opt_.debug->record("rope.inv_freq", {int64_t(inv_freq.size())}, inv_freq.data());
    opt_.debug->record("rope.cos", {S, D}, host.cos.data());
    opt_.debug->record("rope.sin", {S, D}, host.sin.data());
  }
}

template <class T>
std::vector<HostTensor> ForwardPass<T>::run(std::span<const ForwardInputs* const> inputs) {
  if (inputs.empty()) throw Error("model", "a forward needs at least one sample");
  if (opt_.debug && inputs.size() != 1) throw Error("model", "debug records are for a forward of one sample");
  prepare(inputs);
  for (Sample& s : samples_) s.und = understanding(s);
  float* gen = embed_vision();  // [R, E]
  if (opt_.debug) record("gen_embed", {rows_, c_.hidden_size}, gen);
  for (int64_t k = 0; k < c_.num_hidden_layers; ++k) {
    generation_layer(k, gen);
    if (opt_.debug) record("gen_hidden." + std::to_string(k), {rows_, c_.hidden_size}, gen);
  }
  const float* packed = read_out(gen);  // [Σ Nn, p²C] in backend memory
  const int64_t F = samples_.front().g.grid.features();
  if (resident_latent_) {
    for (const Sample& s : samples_) b_.unpatchify(packed + s.noisy_row0 * F, s.g.grid, s.g.noisy_frames, s.velocity);
    return {};
  }
  std::vector<HostTensor> out;
  for (const Sample& s : samples_) {
    const PatchGrid& grid = s.g.grid;
    std::vector<float> host(std::size_t(s.Nn() * F));
    b_.download(host.data(), packed + s.noisy_row0 * F, host.size() * sizeof(float));
    out.push_back({{1, grid.channels, grid.frames, grid.height, grid.width},
                   unpatchify(host.data(), grid, s.g.noisy_frames)});
  }
  return out;
}

}  // namespace

std::vector<HostTensor> Cosmos3Transformer::forward_batch(std::span<const ForwardInputs* const> inputs,
                                                          const ForwardOptions& options) {
  check_tower_precision("generation", weights_.governed.generation_fp8, options.generation);
  check_tower_precision("reasoner", weights_.governed.reasoner_fp8, options.reasoner);
  if (options.activations == ActivationDType::BF16)
    return ForwardPass<uint16_t>(config_, weights_, *backend_, understanding_cache_, rope_cache_, workspace_, options)
        .run(inputs);
  return ForwardPass<float>(config_, weights_, *backend_, understanding_cache_, rope_cache_, workspace_, options)
      .run(inputs);
}

HostTensor Cosmos3Transformer::forward(const ForwardInputs& in, const ForwardOptions& options) {
  const ForwardInputs* one[1] = {&in};
  return std::move(forward_batch(one, options).front());
}

void Cosmos3Transformer::forward_resident(std::span<const ForwardInputs* const> inputs, const float* latent,
                                          std::span<float* const> velocities, const ForwardOptions& options) {
  if (!latent) throw Error("model", "forward_resident: the latent buffer is null");
  if (velocities.size() != inputs.size())
    throw Error("model", "forward_resident: expected one velocity buffer per sample (" +
                             std::to_string(inputs.size()) + "), got " + std::to_string(velocities.size()));
  for (std::size_t i = 0; i < velocities.size(); ++i) {
    if (!velocities[i]) throw Error("model", "forward_resident: velocity buffer " + std::to_string(i) + " is null");
    for (std::size_t j = 0; j < i; ++j)
      if (velocities[j] == velocities[i])
        throw Error("model", "forward_resident: samples " + std::to_string(j) + " and " + std::to_string(i) +
                                 " write the same velocity buffer; each needs its own");
  }
  check_tower_precision("generation", weights_.governed.generation_fp8, options.generation);
  check_tower_precision("reasoner", weights_.governed.reasoner_fp8, options.reasoner);
  if (options.activations == ActivationDType::BF16) {
    ForwardPass<uint16_t>(config_, weights_, *backend_, understanding_cache_, rope_cache_, workspace_, options)
        .resident(latent, velocities)
        .run(inputs);
  } else {
    ForwardPass<float>(config_, weights_, *backend_, understanding_cache_, rope_cache_, workspace_, options)
        .resident(latent, velocities)
        .run(inputs);
  }
}

void Cosmos3Transformer::forward_resident(const ForwardInputs& in, const float* latent, float* velocity,
                                          const ForwardOptions& options) {
  const ForwardInputs* one[1] = {&in};
  float* const out[1] = {velocity};
  forward_resident(one, latent, out, options);
}

}  // namespace stepmix
