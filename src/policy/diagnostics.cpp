#include "policy/diagnostics.hpp"

namespace stepmix::policy_detail {

namespace {
// Enough for any legal field value; a pasted blob should not flood one log line.
constexpr std::size_t kMaxDescribedChars = 120;
}  // namespace

std::string describe(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kMaxDescribedChars) {
    text.resize(kMaxDescribedChars);
    text += "...";
  }
  return text;
}

std::string join(const std::vector<std::string>& items) {
  std::string joined;
  for (const auto& item : items) {
    if (!joined.empty()) joined += ", ";
    joined += item;
  }
  return joined;
}

void fail(const std::string& config_path, const std::string& field, const std::string& message) {
  throw Error(kComponent, config_path + ": " + field + ": " + message);
}

void fail_expected(const std::string& config_path, const std::string& field, const std::string& expected,
                   const nlohmann::json& value) {
  fail(config_path, field, "expected " + expected + ", got " + describe(value));
}

std::string warning(const std::string& config_path, const std::string& field, const std::string& message) {
  return config_path + ": " + field + ": " + message;
}

bool is_integer_equal(const nlohmann::json& value, long long expected) {
  if (value.is_number_unsigned()) return expected >= 0 && value.get<unsigned long long>() == static_cast<unsigned long long>(expected);
  if (value.is_number_integer()) return value.get<long long>() == expected;
  return false;
}

}  // namespace stepmix::policy_detail
