// transformer/config.json: the architecture parser and the pipeline's
// sequence settings either succeed or throw stepmix::Error. A config that
// parses must describe sizes the model can use without overflow: the derived
// widths are positive, the rotary slots cover head_dim/2, and position ids
// for a small request can be built with the settings it yields.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

#include "fuzz_entry.hpp"
#include "model/config.hpp"
#include "pipeline/sequence.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using stepmix::fuzz::run_stage;
  return stepmix::fuzz::run_fuzz_json(data, size, [](const nlohmann::json& config) {
    run_stage([&] {
      const auto parsed = stepmix::parse_cosmos3_config(config, "fuzz/config.json");
      const stepmix::Cosmos3Config& c = parsed.config;
      if (c.q_width() <= 0 || c.kv_width() <= 0 || c.query_groups() < 1) std::abort();
      if (int64_t(c.rope_slot_axes().size()) != c.head_dim / 2) std::abort();
    });
    run_stage([&] {
      const stepmix::SequenceSettings settings = stepmix::read_sequence_settings(config, "fuzz/config.json");
      const std::vector<int64_t> ids{1, 2, 3};
      for (int64_t frames : {1, 3}) {
        const auto in = stepmix::make_pass_inputs(ids, {4, frames, 5, 6}, 24.0, settings);
        if (in.position_ids.size() % 3 != 0 || in.position_ids.size() < 3 * ids.size()) std::abort();
      }
    });
  });
}
