#include "io/png_metadata.hpp"

#include <charconv>
#include <cmath>

namespace stepmix {

std::string python_float_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  std::string text(buf, end);
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

namespace {

// A1111 quotes a value holding a comma, colon or newline as a JSON string,
// so that its "Key: value, ..." parser still splits the line correctly.
std::string quoted(const std::string& value) {
  if (value.find_first_of(",:\n") == std::string::npos) return value;
  return nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string a1111_parameters_text(const GenerationParameters& p) {
  std::string text = p.prompt + "\n";
  if (!p.negative_prompt.empty()) text += "Negative prompt: " + p.negative_prompt + "\n";
  text += "Steps: " + std::to_string(p.steps);
  if (!p.sampler.empty()) text += ", Sampler: " + quoted(p.sampler);
  text += ", CFG scale: " + python_float_text(p.cfg_scale);
  text += ", Seed: " + std::to_string(p.seed);
  text += ", Size: " + std::to_string(p.width) + "x" + std::to_string(p.height);
  if (!p.model.empty()) text += ", Model: " + quoted(p.model);
  for (const auto& [key, value] : p.extra) text += ", " + key + ": " + quoted(value);
  text += ", Version: stepmix " STEPMIX_VERSION;
  return text;
}

std::string stepmix_chunk_text(const StepmixImageInfo& info) {
  nlohmann::json j = {{"version", STEPMIX_VERSION},
                      {"trace", info.trace},
                      {"policy_source", info.policy_source},
                      {"activations", info.activations}};
  if (info.extra.is_object())
    for (const auto& [key, value] : info.extra.items()) j[key] = value;
  return j.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
}

std::vector<PngText> generation_png_text(const GenerationParameters& p, const StepmixImageInfo& info) {
  return {{"parameters", a1111_parameters_text(p), ""}, {"stepmix", stepmix_chunk_text(info), ""}};
}

}  // namespace stepmix
