// Names of the public runtime enums (include/stepmix/runtime.hpp).
#include <string>

#include "stepmix/error.hpp"
#include "stepmix/runtime.hpp"

namespace stepmix {
namespace {

[[noreturn]] void unknown(std::string_view option, std::string_view text, const char* expected) {
  throw Error("options", std::string(option) + ": expected " + expected + ", got '" + std::string(text) + "'");
}

}  // namespace

std::string_view activation_dtype_name(ActivationDType dtype) { return dtype == ActivationDType::BF16 ? "bf16" : "f32"; }
std::string_view weight_cache_name(WeightCache cache) { return cache == WeightCache::All ? "all" : "none"; }
std::string_view device_name(Device device) { return device == Device::Cuda ? "cuda" : "cpu"; }
std::string_view w8a16_rounding_name(W8A16Rounding rounding) {
  return rounding == W8A16Rounding::Diffusers ? "diffusers" : "single";
}

ActivationDType default_activation_dtype(Device device) {
  return device == Device::Cuda ? ActivationDType::BF16 : ActivationDType::F32;
}

ActivationDType parse_activation_dtype(std::string_view text, std::string_view option) {
  if (text == "f32") return ActivationDType::F32;
  if (text == "bf16") return ActivationDType::BF16;
  unknown(option, text, "f32 or bf16");
}

WeightCache parse_weight_cache(std::string_view text, std::string_view option) {
  if (text == "none") return WeightCache::None;
  if (text == "all") return WeightCache::All;
  unknown(option, text, "none or all");
}

W8A16Rounding parse_w8a16_rounding(std::string_view text, std::string_view option) {
  if (text == "single") return W8A16Rounding::Single;
  if (text == "diffusers") return W8A16Rounding::Diffusers;
  unknown(option, text, "single or diffusers");
}

Device parse_device(std::string_view text, std::string_view option) {
  if (text == "cpu") return Device::Cpu;
  if (text == "cuda") return Device::Cuda;
  unknown(option, text, "cpu or cuda");
}

}  // namespace stepmix
