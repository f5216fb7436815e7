#include "model/weights.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "core/numerics.hpp"
#include "quant/governed.hpp"
#include "quant/scale_bounds.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

// Expected shape with the config names that produce it, for messages.
struct ExpectedShape {
  std::vector<int64_t> dims;
  std::string meaning;  // e.g. "[num_attention_heads·head_dim, hidden_size]"
};

class WeightBinder {
 public:
  WeightBinder(const TensorStore& store, WeightCache cache, W8A16Rounding rounding)
      : store_(store), cache_(cache), rounding_(rounding) {}

  [[noreturn]] void fail(const std::string& message) const { throw Error("model", store_.folder() + ": " + message); }

  const TensorView& tensor(const std::string& name, const ExpectedShape& expected) {
    const TensorView* t = store_.find(name);
    if (!t)
      fail("missing tensor '" + name + "' (expected shape " + shape_to_string(expected.dims) + " " + expected.meaning +
           ")");
    if (t->shape != expected.dims)
      fail("tensor '" + name + "' has shape " + shape_to_string(t->shape) + ", expected " +
           shape_to_string(expected.dims) + " " + expected.meaning);
    used_.insert(name);
    return *t;
  }

  const TensorView& float_tensor(const std::string& name, const ExpectedShape& expected) {
    const TensorView& t = tensor(name, expected);
    if (t.dtype != DType::BF16 && t.dtype != DType::F32)
      fail("tensor '" + name + "' is " + std::string(dtype_name(t.dtype)) + ", expected BF16 or F32");
    return t;
  }

  // A norm weight [n], widened to float32.
  std::vector<float> vector(const std::string& name, int64_t n, const std::string& meaning) {
    const TensorView& t = float_tensor(name, {{n}, meaning});
    std::vector<float> out(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      out[std::size_t(i)] = t.dtype == DType::BF16 ? bf16_to_float(t.as<uint16_t>()[i]) : t.as<float>()[i];
    return out;
  }

  // module: e.g. "layers.0.self_attn.to_q". FP8 storage only for governed modules.
  Linear linear(const std::string& module, const ExpectedShape& expected, bool has_bias) {
    const std::optional<Tower> tower = governed_tower(module);
    const std::string weight_name = module + ".weight";
    const TensorView& weight = tensor(weight_name, expected);
    LinearWeights w{module, weight, std::nullopt, std::nullopt, std::nullopt};
    const bool fp8 = weight.dtype == DType::F8_E4M3;
    if (fp8) {
      if (!tower) fail("tensor '" + weight_name + "' is F8_E4M3, but " + module + " is never quantized (only the governed Linears of the two towers may be FP8)");
      w.weight_scale = scale(module + ".weight_scale");
      w.input_scale = scale(module + ".input_scale");
    } else if (weight.dtype != DType::BF16 && weight.dtype != DType::F32) {
      fail("tensor '" + weight_name + "' is " + std::string(dtype_name(weight.dtype)) + ", expected " +
           (tower ? "F8_E4M3, BF16 or F32" : "BF16 or F32"));
    }
    if (has_bias) w.bias = float_tensor(module + ".bias", {{expected.dims[0]}, "[out_features]"});
    if (fp8) fp8_modules_.push_back(module);
    if (tower == Tower::Generation) ++(fp8 ? governed_.generation_fp8 : governed_.generation_dense);
    if (tower == Tower::Reasoner) ++(fp8 ? governed_.reasoner_fp8 : governed_.reasoner_dense);
    return Linear(std::move(w), cache_, rounding_);
  }

  const GovernedCounts& governed() const { return governed_; }
  const std::vector<std::string>& fp8_modules() const { return fp8_modules_; }

  // Every tensor must be bound by now, apart from the text head. A tensor
  // nothing reads means the checkpoint and the config disagree (a layer
  // beyond num_hidden_layers, a module of another architecture, a sound or
  // action head, whose config flags are refused): fail rather than run a
  // different model than the file describes.
  void require_every_tensor_used(const Cosmos3Config& c) {
    if (const TensorView* head = store_.find("lm_head.weight")) {
      // Unused for generation, but a wrong shape says the config is wrong.
      if (head->shape != std::vector<int64_t>{c.vocab_size, c.hidden_size})
        fail("tensor 'lm_head.weight' has shape " + shape_to_string(head->shape) + ", expected " +
             shape_to_string({c.vocab_size, c.hidden_size}) + " [vocab_size, hidden_size]");
      if (head->dtype != DType::BF16 && head->dtype != DType::F32)
        fail("tensor 'lm_head.weight' is " + std::string(dtype_name(head->dtype)) +
             ", expected BF16 or F32 (the text head is never quantized)");
      used_.insert("lm_head.weight");
    }
    std::vector<std::string> unused;
    int64_t beyond_layers = 0;
    for (const std::string& name : store_.names()) {
      if (used_.count(name)) continue;
      unused.push_back(name);
      if (name.rfind("layers.", 0) == 0) {
        const std::string index = name.substr(7, name.find('.', 7) - 7);
        if (!index.empty() && index.size() < 10 && index.find_first_not_of("0123456789") == std::string::npos &&
            std::stoll(index) >= c.num_hidden_layers)
          ++beyond_layers;
      }
    }
    if (unused.empty()) return;
    std::string list;
    for (std::size_t i = 0; i < std::min<std::size_t>(unused.size(), 5); ++i)
      list += (i ? ", '" : "'") + unused[i] + "'";
    if (unused.size() > 5) list += ", ...";
    std::string why;
    if (beyond_layers > 0)
      why = "; " + std::to_string(beyond_layers) + " of them belong to layers beyond num_hidden_layers = " +
            std::to_string(c.num_hidden_layers);
    if (std::any_of(unused.begin(), unused.end(), [](const std::string& n) { return is_foreign_scale_name(n); }))
      why +=
          "; SmoothQuant / NVFP4 scales are not supported (a tensorwise FP8 Linear has only weight_scale "
          "and input_scale)";
    fail(std::to_string(unused.size()) + " tensor" + (unused.size() == 1 ? " is" : "s are") +
         " not used by the model the config describes (" + list + ")" + why +
         "; expected exactly the tensors of a Cosmos3 transformer (plus lm_head.weight)");
  }

 private:
  float scale(const std::string& name) {
    const TensorView* t = store_.find(name);
    if (!t) fail("missing tensor '" + name + "' (an F8_E4M3 weight needs a scalar F32 scale)");
    if (t->dtype != DType::F32 || t->numel() != 1)
      fail("tensor '" + name + "' is " + std::string(dtype_name(t->dtype)) + " " + shape_to_string(t->shape) +
           ", expected one F32 element");
    float v;
    std::memcpy(&v, t->data, sizeof v);
    // Linear checks this too; here the message names the checkpoint folder.
    if (const auto problem = fp8_scale_problem(v)) fail("tensor '" + name + "' " + *problem);
    used_.insert(name);
    return v;
  }

  const TensorStore& store_;
  WeightCache cache_;
  W8A16Rounding rounding_;
  GovernedCounts governed_;
  std::vector<std::string> fp8_modules_;
  std::set<std::string> used_;  // canonical names bound so far
};

MlpWeights load_mlp(WeightBinder& b, const std::string& prefix, const Cosmos3Config& c) {
  const int64_t E = c.hidden_size, I = c.intermediate_size;
  const ExpectedShape widen{{I, E}, "[intermediate_size, hidden_size]"};
  std::optional<Linear> gate;
  if (c.has_gate_proj()) gate.emplace(b.linear(prefix + ".gate_proj", widen, false));
  Linear up = b.linear(prefix + ".up_proj", widen, false);
  Linear down = b.linear(prefix + ".down_proj", {{E, I}, "[hidden_size, intermediate_size]"}, false);
  return MlpWeights{std::move(gate), std::move(up), std::move(down)};
}

AttentionWeights load_attention(WeightBinder& b, const std::string& prefix, const Cosmos3Config& c) {
  const int64_t E = c.hidden_size, D = c.head_dim;
  const ExpectedShape q_shape{{c.q_width(), E}, "[num_attention_heads·head_dim, hidden_size]"};
  const ExpectedShape kv_shape{{c.kv_width(), E}, "[num_key_value_heads·head_dim, hidden_size]"};
  const ExpectedShape out_shape{{E, c.q_width()}, "[hidden_size, num_attention_heads·head_dim]"};
  const bool bias = c.attention_bias;
  const std::string head = "[head_dim]";
  AttentionWeights a{
      b.linear(prefix + ".to_q", q_shape, bias),
      b.linear(prefix + ".to_k", kv_shape, bias),
      b.linear(prefix + ".to_v", kv_shape, bias),
      b.linear(prefix + ".to_out", out_shape, bias),
      b.linear(prefix + ".add_q_proj", q_shape, bias),
      b.linear(prefix + ".add_k_proj", kv_shape, bias),
      b.linear(prefix + ".add_v_proj", kv_shape, bias),
      b.linear(prefix + ".to_add_out", out_shape, bias),
      {},
      {},
      {},
      b.vector(prefix + ".norm_added_q.weight", D, head),
      b.vector(prefix + ".norm_added_k.weight", D, head),
  };
  if (c.qk_norm_for_text) {
    a.norm_q = b.vector(prefix + ".norm_q.weight", D, head);
    a.norm_k = b.vector(prefix + ".norm_k.weight", D, head);
  }
  if (c.has_und_k_norm_for_gen()) a.k_norm_und_for_gen = b.vector(prefix + ".k_norm_und_for_gen.weight", D, head);
  return a;
}

}  // namespace

Cosmos3Weights load_cosmos3_weights(const TensorStore& store, const Cosmos3Config& c, WeightCache cache,
                                    W8A16Rounding rounding) {
  WeightBinder b(store, cache, rounding);
  const int64_t E = c.hidden_size, F = c.patch_latent_dim;
  const std::string hidden = "[hidden_size]";

  std::vector<DecoderLayerWeights> layers;
  // num_hidden_layers comes from config.json: reserve no more layers than the
  // checkpoint could hold (every layer binds tensors of its own), so a wrong
  // count fails on its first missing tensor instead of in the allocator.
  layers.reserve(std::size_t(std::min<int64_t>(c.num_hidden_layers, int64_t(store.size()))));
  for (int64_t k = 0; k < c.num_hidden_layers; ++k) {
    const std::string prefix = "layers." + std::to_string(k);
    layers.push_back(DecoderLayerWeights{
        b.vector(prefix + ".input_layernorm.weight", E, hidden),
        b.vector(prefix + ".input_layernorm_moe_gen.weight", E, hidden),
        b.vector(prefix + ".post_attention_layernorm.weight", E, hidden),
        b.vector(prefix + ".post_attention_layernorm_moe_gen.weight", E, hidden),
        load_attention(b, prefix + ".self_attn", c),
        load_mlp(b, prefix + ".mlp", c),
        load_mlp(b, prefix + ".mlp_moe_gen", c),
    });
  }

  Cosmos3Weights w{
      b.float_tensor("embed_tokens.weight", {{c.vocab_size, E}, "[vocab_size, hidden_size]"}),
      std::move(layers),
      b.vector("norm.weight", E, hidden),
      b.vector("norm_moe_gen.weight", E, hidden),
      b.linear("proj_in", {{E, F}, "[hidden_size, patch_latent_dim]"}, true),
      b.linear("proj_out", {{F, E}, "[patch_latent_dim, hidden_size]"}, true),
      b.linear("time_embedder.linear_1", {{E, 256}, "[hidden_size, 256]"}, true),
      b.linear("time_embedder.linear_2", {{E, E}, "[hidden_size, hidden_size]"}, true),
      b.governed(),
      b.fp8_modules(),
      store.files(),
  };
  b.require_every_tensor_used(c);
  return w;
}

}  // namespace stepmix
