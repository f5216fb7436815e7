// Names of the policy's enums and the parsers for user-typed values
// (docs/step-policy.md §6).
#include <algorithm>
#include <cctype>
#include <utility>

#include "stepmix/error.hpp"
#include "stepmix/policy.hpp"
#include "policy/diagnostics.hpp"

namespace stepmix {

namespace {

std::string lowercase(std::string_view text) {
  std::string lowered(text);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lowered;
}

template <typename Value>
using Spellings = std::initializer_list<std::pair<std::string_view, Value>>;

// User values are case-insensitive (unlike checkpoint values, §2).
template <typename Value>
Value parse_user_word(std::string_view option, std::string_view text, Spellings<Value> spellings) {
  const std::string lowered = lowercase(text);
  std::string accepted;
  for (const auto& [spelling, value] : spellings) {
    if (lowered == spelling) return value;
    if (!accepted.empty()) accepted += ", ";
    accepted += spelling;
  }
  throw Error(policy_detail::kComponent, std::string(option) + ": expected one of " + accepted + " (any case), got \"" +
                                             std::string(text) + "\"");
}

}  // namespace

std::string_view precision_json_name(Precision precision) {
  switch (precision) {
    case Precision::BF16: return "bf16";
    case Precision::W8A16: return "w8a16";
    case Precision::W8A8: return "w8a8";
  }
  throw Error(policy_detail::kComponent, "unknown Precision value");
}

std::string_view precision_trace_token(Precision precision) {
  switch (precision) {
    case Precision::BF16: return "BF16";
    case Precision::W8A16: return "W8A16";
    case Precision::W8A8: return "W8A8";
  }
  throw Error(policy_detail::kComponent, "unknown Precision value");
}

std::string_view tower_mode_name(TowerMode mode) { return mode == TowerMode::A16 ? "a16" : "native"; }

std::string_view mixed_precision_mode_name(MixedPrecisionMode mode) {
  switch (mode) {
    case MixedPrecisionMode::Auto: return "auto";
    case MixedPrecisionMode::None: return "none";
    case MixedPrecisionMode::Fp8: return "fp8";
  }
  throw Error(policy_detail::kComponent, "unknown MixedPrecisionMode value");
}

std::string_view tower_name(Tower tower) { return tower == Tower::Generation ? "generation" : "reasoner"; }

MixedPrecisionMode parse_mixed_precision_mode(std::string_view text) {
  return parse_user_word<MixedPrecisionMode>(
      "mixed_precision", text,
      {{"auto", MixedPrecisionMode::Auto}, {"none", MixedPrecisionMode::None}, {"fp8", MixedPrecisionMode::Fp8}});
}

TowerMode parse_reasoner_mode(std::string_view text) {
  return parse_user_word<TowerMode>("reasoner", text,
                                    {{"a16", TowerMode::A16},
                                     {"native", TowerMode::Native},
                                     {"high_precision", TowerMode::A16},
                                     {"base_precision", TowerMode::Native}});
}

TowerMode parse_overlap_mode(std::string_view text) {
  return parse_user_word<TowerMode>("overlap", text, {{"a16", TowerMode::A16}, {"native", TowerMode::Native}});
}

}  // namespace stepmix
