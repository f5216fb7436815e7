// Shared wording of policy diagnostics, so every message has the same shape:
//   [policy] <file>: <field path>: expected <accepted>, got <value>
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "stepmix/error.hpp"

namespace stepmix::policy_detail {

inline constexpr const char* kComponent = "policy";

// Compact JSON text of a value for a message (strings keep their quotes so
// that "1" and 1 read differently); long values are shortened.
std::string describe(const nlohmann::json& value);

// "a, b, c" in the given order.
std::string join(const std::vector<std::string>& items);

// Throws Error("policy", "<file>: <field>: <message>").
[[noreturn]] void fail(const std::string& config_path, const std::string& field, const std::string& message);

// Throws "<file>: <field>: expected <expected>, got <describe(value)>".
[[noreturn]] void fail_expected(const std::string& config_path, const std::string& field, const std::string& expected,
                                const nlohmann::json& value);

// Warning text in the same shape, without throwing.
std::string warning(const std::string& config_path, const std::string& field, const std::string& message);

// True for a JSON integer (not boolean, not float) equal to `expected`.
bool is_integer_equal(const nlohmann::json& value, long long expected);

}  // namespace stepmix::policy_detail
