#include "model/checkpoint_check.hpp"

#include "stepmix/policy.hpp"

namespace stepmix {

std::vector<std::string> model_directory_warnings(const ModelDirectory& dir) {
  std::vector<std::string> warnings = parse_cosmos3_config(dir.config, dir.config_path).warnings;
  if (dir.hf_quant_config_path) {
    const auto w = root_quant_config_warnings(dir.hf_quant_config, *dir.hf_quant_config_path);
    warnings.insert(warnings.end(), w.begin(), w.end());
  }
  return warnings;
}

CheckedCheckpoint check_cosmos3_checkpoint(const ModelDirectory& dir, const TensorStore& store) {
  ParsedCosmos3Config parsed = parse_cosmos3_config(dir.config, dir.config_path);
  const Cosmos3Weights weights = load_cosmos3_weights(store, parsed.config, WeightCache::None);
  CheckedCheckpoint out{parsed.config, weights.governed, model_directory_warnings(dir)};
  return out;
}

}  // namespace stepmix
