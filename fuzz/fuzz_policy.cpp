// transformer/config.json with quantization_config: classification, the
// strict policy parser, resolution under every mode and the per-run plan
// either succeed or throw stepmix::Error. A successful plan has exactly
// num_steps entries.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "fuzz_entry.hpp"
#include "stepmix/policy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return stepmix::fuzz::run_fuzz_json(data, size, [](const nlohmann::json& config) {
    if (!config.is_object()) return;
    using stepmix::MixedPrecisionMode;
    for (MixedPrecisionMode mode : {MixedPrecisionMode::Auto, MixedPrecisionMode::None, MixedPrecisionMode::Fp8}) {
      stepmix::fuzz::run_stage([&] {
        stepmix::PolicyOverrides overrides;
        overrides.mode = mode;
        const auto policy = stepmix::resolve_policy(config, "fuzz/config.json", overrides);
        for (int steps : {1, 2, 8, 35}) {
          const auto plan =
              stepmix::plan_steps(policy, policy.quant.kind == stepmix::QuantizationKind::ModelOptFp8, steps);
          if (int(plan.generation.size()) != steps) std::abort();
          (void)stepmix::trace_string(plan.generation);
        }
      });
    }
  });
}
