#include "synthetic_checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/numerics.hpp"
#include "core/thread_pool.hpp"
#include "io/safetensors.hpp"
#include "kernels/kernel_set.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

using json = nlohmann::json;

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1) from a 64-bit hash: 24 bits, exact in float.
float uniform_of(uint64_t z) { return float(int64_t(z >> 40) - (int64_t(1) << 23)) * (1.0f / float(1 << 23)); }

// splitmix64 addressed by element index: element i of a stream is a function
// of (stream, i) alone, so a tensor can be filled in parallel pieces and the
// same on every platform.
class CounterStream {
 public:
  CounterStream(uint64_t seed, const std::string& name) {
    uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a of the name, mixed with the seed
    for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
    base_ = mix64(seed ^ mix64(h));
  }
  float at(int64_t i) const { return uniform_of(mix64(base_ + uint64_t(i + 1) * 0x9E3779B97F4A7C15ull)); }

 private:
  uint64_t base_ = 0;
};

constexpr float kSqrt3 = 1.7320508075688772f;

template <class Fn>
void parallel_pieces(int64_t count, const Fn& fn) {
  constexpr int64_t kPiece = 1 << 20;
  ThreadPool::global().parallel_for((count + kPiece - 1) / kPiece, [&](int64_t p) {
    fn(p * kPiece, std::min(count, (p + 1) * kPiece));
  });
}

// bf16 values with standard deviation `std` (uniform noise) around `mean`.
std::vector<uint16_t> random_bf16(const CounterStream& rng, int64_t count, float mean, float std) {
  std::vector<uint16_t> out(static_cast<std::size_t>(count));
  parallel_pieces(count, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[std::size_t(i)] = float_to_bf16_rne(mean + std * kSqrt3 * rng.at(i));
  });
  return out;
}

// One tensor of the plan: random bf16 values, or a governed Linear (BF16, or
// its FP8 weight + weight_scale + input_scale).
struct TensorSpec {
  std::string name;  // without ".weight" for governed Linears
  std::vector<int64_t> shape;
  bool governed = false;
  float mean = 0.0f, std = 1.0f;
};

struct HeaderEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  uint64_t offset = 0;  // in the data area
};

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<HeaderEntry> header_entries(const std::vector<TensorSpec>& specs, bool fp8) {
  std::vector<HeaderEntry> out;
  for (const TensorSpec& s : specs) {
    const uint64_t n = uint64_t(numel(s.shape));
    if (s.governed && fp8) {
      out.push_back({s.name + ".weight", DType::F8_E4M3, s.shape, n});
      out.push_back({s.name + ".weight_scale", DType::F32, {}, 4});
      out.push_back({s.name + ".input_scale", DType::F32, {}, 4});
    } else {
      out.push_back({s.governed ? s.name + ".weight" : s.name, DType::BF16, s.shape, 2 * n});
    }
  }
  return out;
}

// A safetensors file written tensor by tensor: the header (with every
// offset) first, then each tensor's bytes at its place, in any order. Written
// under a temporary name and renamed by finish(); removed if never finished.
class ShardWriter {
 public:
  ShardWriter(std::string path, std::vector<HeaderEntry> entries) : path_(std::move(path)), temp_(path_ + ".partial") {
    // Largest elements first keeps every tensor aligned to its element size.
    std::sort(entries.begin(), entries.end(), [](const HeaderEntry& a, const HeaderEntry& b) {
      const auto sa = dtype_size(a.dtype), sb = dtype_size(b.dtype);
      return sa != sb ? sa > sb : a.name < b.name;
    });
    json header = json::object();
    header["__metadata__"] = {{"format", "pt"}};
    uint64_t offset = 0;
    for (HeaderEntry& e : entries) {
      e.offset = offset;
      header[e.name] = {{"dtype", std::string(dtype_name(e.dtype))}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.bytes}}};
      offset += e.bytes;
      entries_[e.name] = e;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    data_start_ = 8 + text.size();
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd_ < 0) fail("cannot create");
    const uint64_t n = text.size();
    write_at(&n, 8, 0);
    write_at(text.data(), text.size(), 8);
  }
  ~ShardWriter() {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(temp_.c_str());
    }
  }
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  void put(const std::string& name, const void* data, std::size_t bytes) {
    const auto it = entries_.find(name);
    if (it == entries_.end() || it->second.bytes != bytes)
      throw Error("synthetic", path_ + ": tensor '" + name + "' is not planned with " + std::to_string(bytes) + " bytes");
    write_at(data, bytes, data_start_ + it->second.offset);
    written_ += bytes;
  }

  void finish() {
    uint64_t planned = 0;
    for (const auto& [name, e] : entries_) planned += e.bytes;
    if (written_ != planned) throw Error("synthetic", path_ + ": wrote " + std::to_string(written_) + " of " + std::to_string(planned) + " bytes");
    if (::close(fd_) != 0) {
      fd_ = -1;
      fail("cannot close");
    }
    fd_ = -1;
    if (std::rename(temp_.c_str(), path_.c_str()) != 0) fail("cannot rename into place");
  }

 private:
  [[noreturn]] void fail(const char* what) {
    throw Error("synthetic", temp_ + ": " + what + ": " + std::strerror(errno));
  }
  void write_at(const void* data, std::size_t bytes, uint64_t at) {
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::pwrite(fd_, p, bytes, off_t(at));
      if (n <= 0) fail("write failed (disk full?)");
      p += n, at += uint64_t(n), bytes -= std::size_t(n);
    }
  }

  std::string path_, temp_;
  int fd_ = -1;
  uint64_t data_start_ = 0, written_ = 0;
  std::map<std::string, HeaderEntry> entries_;
};

void write_tensor(ShardWriter& out, const TensorSpec& s, bool fp8, uint64_t seed) {
  const int64_t n = numel(s.shape);
  const std::vector<uint16_t> values = random_bf16(CounterStream(seed, s.name), n, s.mean, s.std);
  if (!s.governed || !fp8) {
    out.put(s.governed ? s.name + ".weight" : s.name, values.data(), values.size() * 2);
    return;
  }
  std::vector<float> piece_max(std::size_t((n + (1 << 20) - 1) >> 20), 0.0f);
  parallel_pieces(n, [&](int64_t begin, int64_t end) {
    float m = 0.0f;
    for (int64_t i = begin; i < end; ++i) m = std::max(m, std::fabs(bf16_to_float(values[std::size_t(i)])));
    piece_max[std::size_t(begin >> 20)] = m;
  });
  const float amax = *std::max_element(piece_max.begin(), piece_max.end());
  const float weight_scale = amax / kE4M3Max, input_scale = 8.0f / kE4M3Max;
  // The active kernel's quantizer: clamp(x / s) then RNE, as the scalar rule
  // (tests/kernels checks every variant against it bit for bit).
  std::vector<uint8_t> codes(values.size());
  const auto quantize = kernels::active_kernels().linear.quantize_e4m3_bf16;
  parallel_pieces(n, [&](int64_t begin, int64_t end) {
    quantize(values.data() + begin, end - begin, weight_scale, codes.data() + begin);
  });
  out.put(s.name + ".weight", codes.data(), codes.size());
  out.put(s.name + ".weight_scale", &weight_scale, 4);
  out.put(s.name + ".input_scale", &input_scale, 4);
}

std::vector<TensorSpec> layer_specs(const SyntheticModelShape& s, int64_t k) {
  const int64_t E = s.hidden_size, I = s.intermediate_size, D = s.head_dim;
  const int64_t q_width = s.heads * D, kv_width = s.kv_heads * D;
  std::vector<TensorSpec> out;
  const auto norm = [&](const std::string& name, int64_t n) { out.push_back({name, {n}, false, 1.0f, 0.05f}); };
  const auto governed = [&](const std::string& name, int64_t rows, int64_t cols) {
    out.push_back({name, {rows, cols}, true, 0.0f, 1.0f / std::sqrt(float(cols))});
  };
  const std::string layer = "layers." + std::to_string(k);
  for (const char* n : {"input_layernorm", "input_layernorm_moe_gen", "post_attention_layernorm",
                        "post_attention_layernorm_moe_gen"})
    norm(layer + "." + n + ".weight", E);
  const std::string attn = layer + ".self_attn";
  for (const char* proj : {"to_q", "add_q_proj"}) governed(attn + "." + proj, q_width, E);
  for (const char* proj : {"to_k", "to_v", "add_k_proj", "add_v_proj"}) governed(attn + "." + proj, kv_width, E);
  for (const char* proj : {"to_out", "to_add_out"}) governed(attn + "." + proj, E, q_width);
  for (const char* n : {"norm_q", "norm_k", "norm_added_q", "norm_added_k"}) norm(attn + "." + n + ".weight", D);
  for (const char* mlp : {"mlp", "mlp_moe_gen"}) {
    const std::string m = layer + "." + mlp;
    governed(m + ".gate_proj", I, E);
    governed(m + ".up_proj", I, E);
    governed(m + ".down_proj", E, I);
  }
  return out;
}

// Everything outside the decoder layers.
std::vector<TensorSpec> outer_specs(const SyntheticModelShape& s) {
  const int64_t E = s.hidden_size, F = s.patch * s.patch * s.latent_channel;
  std::vector<TensorSpec> out{{"embed_tokens.weight", {s.vocab_size, E}, false, 0.0f, 1.0f},
                              {"norm.weight", {E}, false, 1.0f, 0.05f},
                              {"norm_moe_gen.weight", {E}, false, 1.0f, 0.05f}};
  const auto dense = [&](const std::string& name, int64_t rows, int64_t cols) {
    out.push_back({name + ".weight", {rows, cols}, false, 0.0f, 1.0f / std::sqrt(float(cols))});
    out.push_back({name + ".bias", {rows}, false, 0.0f, 0.02f});
  };
  dense("proj_in", E, F);
  dense("proj_out", F, E);
  dense("time_embedder.linear_1", E, 256);
  dense("time_embedder.linear_2", E, E);
  return out;
}

// The shards of a checkpoint: [outer + every layer] or [each layer..., outer].
std::vector<std::vector<TensorSpec>> shard_plan(const SyntheticModelShape& s, bool per_layer) {
  std::vector<std::vector<TensorSpec>> shards;
  if (!per_layer) shards.push_back(outer_specs(s));
  for (int64_t k = 0; k < s.layers; ++k) {
    std::vector<TensorSpec> layer = layer_specs(s, k);
    if (per_layer) {
      shards.push_back(std::move(layer));
    } else {
      shards.front().insert(shards.front().end(), layer.begin(), layer.end());
    }
  }
  if (per_layer) shards.push_back(outer_specs(s));
  return shards;
}

std::string shard_name(std::size_t index, std::size_t count) {
  char name[96];
  std::snprintf(name, sizeof name, "diffusion_pytorch_model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

}  // namespace

SyntheticModelShape tiny_shape(int64_t latent_channel) {
  SyntheticModelShape s;
  s.hidden_size = 32;
  s.intermediate_size = 64;
  s.layers = 1;
  s.heads = 2;
  s.kv_heads = 1;
  s.head_dim = 16;
  s.vocab_size = 16;
  s.latent_channel = latent_channel;
  return s;
}

SyntheticModelShape benchmark_shape(int64_t hidden, int64_t layers) {
  SyntheticModelShape s;
  s.hidden_size = hidden;
  s.intermediate_size = 3 * hidden;
  s.layers = layers;
  s.head_dim = 128;
  s.heads = hidden / 128;
  s.kv_heads = s.heads / 4;
  s.vocab_size = 1024;
  s.latent_channel = 48;
  s.patch = 2;
  return s;
}

json synthetic_config(const SyntheticModelShape& s, bool fp8) {
  // Slots: as many T slots as needed, H and W sharing the rest (Nano: 24/20/20 of 64).
  const int64_t slots = s.head_dim / 2;
  const int64_t spatial = (slots * 5 / 16);
  json c = {
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
  if (fp8) {
    const json policy = {{"schema_version", 1},
                         {"type", "first_last_n"},
                         {"index_space", "denoising_loop_iteration"},
                         {"scope", {"transformer"}},
                         {"default_mode", "native"},
                         {"first_steps", {{"count", 3}, {"mode", "a16"}}},
                         {"last_steps", {{"count", 3}, {"mode", "a16"}}},
                         {"overlap", "a16"},
                         {"reasoner", "a16"}};
    c["quantization_config"] = {{"quant_method", "modelopt"},
                                {"quant_algo", "FP8"},
                                {"ignore", {"proj_in", "proj_out", "time_embedder*", "lm_head"}},
                                {"runtime", {{"diffusion_step_policy", policy}}}};
  }
  return c;
}

int64_t synthetic_checkpoint_bytes(const SyntheticModelShape& s, bool fp8) {
  int64_t total = 0;
  for (const auto& shard : shard_plan(s, false))
    for (const HeaderEntry& e : header_entries(shard, fp8)) total += int64_t(e.bytes);
  return total;
}

void write_synthetic_transformer(const std::string& folder, const SyntheticModelShape& s,
                                 const SyntheticWriteOptions& o) {
  std::filesystem::create_directories(folder);
  const auto shards = shard_plan(s, o.shard_per_layer);
  json weight_map = json::object();
  int64_t total = 0;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string name =
        o.shard_per_layer ? shard_name(i, shards.size()) : std::string("diffusion_pytorch_model.safetensors");
    std::vector<HeaderEntry> entries = header_entries(shards[i], o.fp8);
    for (const HeaderEntry& e : entries) {
      weight_map[e.name] = name;
      total += int64_t(e.bytes);
    }
    ShardWriter out(folder + "/" + name, std::move(entries));
    for (const TensorSpec& spec : shards[i]) write_tensor(out, spec, o.fp8, o.seed);
    out.finish();
    if (o.progress) o.progress("shard " + std::to_string(i + 1) + "/" + std::to_string(shards.size()) + " " + name);
  }
  if (o.shard_per_layer)
    write_file_atomic(folder + "/diffusion_pytorch_model.safetensors.index.json",
                      json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) + "\n");
  write_file_atomic(folder + "/config.json", synthetic_config(s, o.fp8).dump(2) + "\n");
}

void write_synthetic_transformer(const std::string& folder, const SyntheticModelShape& s, bool fp8, uint64_t seed) {
  SyntheticWriteOptions o;
  o.fp8 = fp8;
  o.seed = seed;
  write_synthetic_transformer(folder, s, o);
}

ForwardInputs synthetic_inputs(const SyntheticModelShape& s, int64_t text_tokens, int64_t latent_height,
                               int64_t latent_width, float timestep, uint64_t seed) {
  const CounterStream ids(seed, "input_ids"), noise(seed, "vision_latent");
  ForwardInputs in;
  const int64_t L = text_tokens, C = s.latent_channel, H = latent_height, W = latent_width;
  const int64_t Hp = (H + s.patch - 1) / s.patch, Wp = (W + s.patch - 1) / s.patch, S = L + Hp * Wp;
  in.input_ids.resize(std::size_t(L));
  for (int64_t i = 0; i < L; ++i)
    in.input_ids[std::size_t(i)] =
        std::min<int64_t>(s.vocab_size - 1, int64_t((ids.at(i) + 1.0f) * 0.5f * float(s.vocab_size)));
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
  for (int64_t i = 0; i < C * H * W; ++i) in.latent.data[std::size_t(i)] = kSqrt3 * noise.at(i);
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
