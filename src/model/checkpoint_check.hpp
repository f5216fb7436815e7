// Everything that can be known about a Cosmos3 checkpoint without running
// it, for commands that do not load the model (inspect) and as the one list
// of warnings every command prints: the config parsed fail-closed, every
// tensor bound against it (shapes, dtypes, scale ranges, no unused tensor),
// and the warnings of the config and of hf_quant_config.json.
#pragma once

#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "model/config.hpp"
#include "model/weights.hpp"

namespace stepmix {

struct CheckedCheckpoint {
  Cosmos3Config config;
  GovernedCounts governed;
  std::vector<std::string> warnings;  // one line each, "[component] file: key: ..."
};

// Throws stepmix::Error on the first problem (the same errors as loading the
// model for a run, apart from the quantization checks, classify_quantization /
// require_supported_quantization and require_weights_match_quantization,
// which inspect makes itself first). Cheap: nothing is converted or
// cached (WeightCache::None), only norm vectors are widened.
CheckedCheckpoint check_cosmos3_checkpoint(const ModelDirectory& dir, const TensorStore& store);

// The warnings alone, for a command that loads the model itself: the
// config's (the same as Cosmos3Transformer::warnings(), so take one or the
// other) and hf_quant_config.json's.
std::vector<std::string> model_directory_warnings(const ModelDirectory& dir);

}  // namespace stepmix
