// A *.safetensors.index.json parses into a weight map or fails with
// stepmix::Error; every accepted shard name stays inside the folder.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_entry.hpp"
#include "io/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return stepmix::fuzz::run_fuzz_json(data, size, [](const nlohmann::json& index) {
    for (const auto& [name, shard] : stepmix::parse_weight_map(index, "fuzz.safetensors.index.json"))
      if (shard.find('/') != std::string::npos || shard.find('\\') != std::string::npos ||
          shard.find('\0') != std::string::npos || shard == "." || shard == ".." || !shard.ends_with(".safetensors"))
        std::abort();
  });
}
