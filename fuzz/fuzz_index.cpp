// A *.safetensors.index.json parses into a weight map or fails with
// stepmix::Error; every accepted shard name stays inside the folder.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "io/checkpoint.hpp"
#include "io/json_input.hpp"
#include "stepmix/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Parsed as the CLI parses these files (nesting limit, then JSON; every
  // parser exception mapped to stepmix::Error).
  nlohmann::json index;
  try {
    index = stepmix::parse_json_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json", "fuzz");
  } catch (const stepmix::Error&) {
    return 0;
  }
  try {
    for (const auto& [name, shard] : stepmix::parse_weight_map(index, "fuzz.safetensors.index.json"))
      if (shard.find('/') != std::string::npos || shard.find('\\') != std::string::npos ||
          shard.find('\0') != std::string::npos || shard == "." || shard == ".." || !shard.ends_with(".safetensors"))
        std::abort();
  } catch (const stepmix::Error&) {
  }
  return 0;
}
