// What a PNG stepmix writes says about how it was made, in the two forms
// readers know:
//  - "parameters" (tEXt), the text stable-diffusion.cpp and the A1111 web UI
//    write and parse: the prompt, a "Negative prompt: " line when there is
//    one, then one line of "Key: value" pairs, e.g.
//      a boot
//      Negative prompt: blurry
//      Steps: 8, Sampler: UniPC, CFG scale: 3.0, Seed: 42, Size: 28x28, Model: fashion-cosmos3-fp8, Version: stepmix 0.1.0
//  - "stepmix" (tEXt), a JSON object with what those lines cannot say: the
//    precision trace, where the step policy came from, the activation dtype,
//    the version, and anything else the command adds.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "io/png.hpp"

namespace stepmix {

struct GenerationParameters {
  std::string prompt;
  std::string negative_prompt;  // the line is left out when empty
  int64_t steps = 0;
  std::string sampler;          // e.g. "UniPC", "Euler"
  double cfg_scale = 0;
  uint64_t seed = 0;
  int64_t width = 0, height = 0;
  std::string model;            // the model folder's name
  // Appended in order after Model ("Version" is added last by stepmix).
  std::vector<std::pair<std::string, std::string>> extra;
};

// The "parameters" text. Numbers as Python's repr writes them (3 → "3.0"),
// because A1111's parser and the readers built on it expect that form.
std::string a1111_parameters_text(const GenerationParameters& p);

struct StepmixImageInfo {
  std::string trace;          // "W8A16x3 / W8A8x2 / W8A16x3"
  std::string policy_source;  // "checkpoint", "cli", ...
  std::string activations;    // "f32" or "bf16"
  nlohmann::json extra = nlohmann::json::object();  // merged into the object
};

// The "stepmix" JSON (ASCII: non-ASCII characters escaped, so the chunk is tEXt).
std::string stepmix_chunk_text(const StepmixImageInfo& info);

// Both chunks, ready for encode_png / write_png.
std::vector<PngText> generation_png_text(const GenerationParameters& p, const StepmixImageInfo& info);

// Formats a double as Python's repr would for the values stepmix writes
// (shortest round-trip digits, ".0" on whole numbers; "nan"/"inf" as is).
std::string python_float_text(double v);

}  // namespace stepmix
