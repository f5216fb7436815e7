// Command-line options that choose how a loaded transformer runs, shared by
// forward, generate, bench and compare: the activation dtype of its Linears
// and the dense-weight cache of its FP8 Linears.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "model/transformer.hpp"
#include "stepmix/error.hpp"

namespace stepmix::cli {

struct RuntimeOptions {
  std::string activations = "f32";
  std::string weight_cache = "none";

  // Validated before any model is loaded, so a typo never waits for a load.
  void validate(const char* command) const {
    if (activations != "f32" && activations != "bf16")
      throw Error(command, "--activations: expected f32 or bf16, got '" + activations + "'");
    if (weight_cache != "none" && weight_cache != "all")
      throw Error(command, "--weight-cache: expected none or all, got '" + weight_cache + "'");
  }
  WeightCache cache() const { return weight_cache == "all" ? WeightCache::All : WeightCache::None; }
  ActivationDType activation_dtype() const {
    return activations == "bf16" ? ActivationDType::BF16 : ActivationDType::F32;
  }
  Cosmos3Transformer load(const ModelDirectory& dir) const {
    Cosmos3Transformer model = Cosmos3Transformer::load(dir, cache());
    model.set_activation_dtype(activation_dtype());
    return model;
  }
};

inline void add_runtime_options(CLI::App& cmd, RuntimeOptions& o) {
  cmd.add_option("--activations", o.activations,
                 "Activation dtype of the Linears: f32 (default; matches float32 references) or bf16 (16-bit "
                 "activations as production runtimes use; faster)")
      ->default_val("f32");
  cmd.add_option("--weight-cache", o.weight_cache,
                 "none: FP8 weights stay 1 byte/parameter; all: keep a BF16 copy (2 bytes/parameter more)")
      ->default_val("none");
}

}  // namespace stepmix::cli
