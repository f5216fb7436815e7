// Tests check a stepmix::Error by fragments of its message; this runs the
// code and hands back that message.
#pragma once

#include <functional>
#include <string>

#include "stepmix/error.hpp"

namespace stepmix::test {

// The message of the stepmix::Error that `f` throws, or "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace stepmix::test
