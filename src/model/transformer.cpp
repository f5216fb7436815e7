// Loading a Cosmos3 transformer and the hooks tests and calibration attach to
// its Linears. The forward itself is forward_pass.cpp.
#include "model/transformer.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "stepmix/error.hpp"
#include "stepmix/policy.hpp"

namespace stepmix {

void ForwardDebug::record(const std::string& name, std::vector<int64_t> shape, const float* data) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  tensors[name] = HostTensor{std::move(shape), std::vector<float>(data, data + n)};
}

Cosmos3Transformer::Cosmos3Transformer(Cosmos3Config config, std::vector<std::string> warnings, Cosmos3Weights weights,
                                       Backend& backend)
    : config_(std::move(config)),
      warnings_(std::move(warnings)),
      weights_(std::move(weights)),
      backend_(&backend),
      workspace_(backend) {}

Cosmos3Transformer Cosmos3Transformer::load(const ModelDirectory& dir, WeightCache cache, Backend& backend) {
  return load(TensorStore::open_folder(dir.transformer_dir), dir.config, dir.config_path, cache, backend);
}

Cosmos3Transformer Cosmos3Transformer::load(const TensorStore& store, const nlohmann::json& config,
                                            const std::string& config_path, WeightCache cache, Backend& backend,
                                            W8A16Rounding rounding) {
  ParsedCosmos3Config parsed = parse_cosmos3_config(config, config_path);
  Cosmos3Weights weights = load_cosmos3_weights(store, parsed.config, cache, rounding);
  // Every loader (the model API, quantize, calibration, tests) gets these
  // checks here, whether or not it has resolved a step policy from the same
  // config first: classifying it again is cheap, trusting a caller is not.
  const QuantizationInfo quant = classify_quantization(config, config_path);
  require_supported_quantization(quant, config_path);
  require_weights_match_quantization(quant, weights.fp8_modules, store.folder(), config_path);
  return Cosmos3Transformer(std::move(parsed.config), std::move(parsed.warnings), std::move(weights), backend);
}

namespace {

// fn(linear) for every governed Linear of `weights` (const or not).
template <class Weights, class Fn>
void visit_governed(Weights& weights, const Fn& fn) {
  for (auto& layer : weights.layers) {
    auto& a = layer.attention;
    for (auto* l : {&a.to_q, &a.to_k, &a.to_v, &a.to_out, &a.add_q_proj, &a.add_k_proj, &a.add_v_proj, &a.to_add_out})
      fn(*l);
    for (auto* m : {&layer.mlp, &layer.mlp_moe_gen}) {
      if (m->gate_proj) fn(*m->gate_proj);
      fn(m->up_proj);
      fn(m->down_proj);
    }
  }
}

}  // namespace

void Cosmos3Transformer::for_each_governed_linear(const std::function<void(Linear&)>& fn) {
  visit_governed(weights_, fn);
}

void Cosmos3Transformer::for_each_governed_linear(const std::function<void(const Linear&)>& fn) const {
  visit_governed(weights_, fn);
}

void Cosmos3Transformer::require_runnable(const StepPlan& plan) const {
  std::vector<Precision> generation;
  for (Precision p : plan.generation)
    if (std::find(generation.begin(), generation.end(), p) == generation.end()) generation.push_back(p);
  visit_governed(weights_, [&](const Linear& l) {
    if (governed_tower(l.name()) == Tower::Reasoner) {
      backend_->require_runnable(l, plan.reasoner);
    } else {
      for (Precision p : generation) backend_->require_runnable(l, p);
    }
  });
}

std::size_t Cosmos3Transformer::weight_cache_bytes() const {
  std::size_t bytes = 0;
  visit_governed(weights_, [&](const Linear& l) { bytes += l.resident_bytes(); });
  return bytes;
}

void Cosmos3Transformer::set_activation_code_hook(const ActivationCodeHook& hook) {
  for_each_governed_linear([&](Linear& l) { l.set_code_hook(hook); });
  has_code_hook_ = bool(hook);
}

void Cosmos3Transformer::check_tower_precision(const char* tower, int fp8_linears, Precision precision) const {
  if (fp8_linears > 0 && precision == Precision::BF16)
    throw Error("model", std::string("the ") + tower + " tower holds " + std::to_string(fp8_linears) +
                             " FP8 Linears, which run W8A16 or W8A8; dense arithmetic needs the BF16 checkpoint");
}

}  // namespace stepmix
