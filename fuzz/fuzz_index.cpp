// A *.safetensors.index.json parses into a weight map or fails with
// stepmix::Error; every accepted shard name stays inside the folder.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "io/checkpoint.hpp"
#include "stepmix/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json index = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded()) return 0;
  try {
    for (const auto& [name, shard] : stepmix::parse_weight_map(index, "fuzz.safetensors.index.json"))
      if (shard.find('/') != std::string::npos || shard == "..") std::abort();
  } catch (const stepmix::Error&) {
  }
  return 0;
}
