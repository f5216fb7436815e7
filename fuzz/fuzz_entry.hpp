// The part every libFuzzer target shares, so that what counts as a crash is
// decided in one place: a stepmix::Error is a clean rejection of the input;
// anything else (another exception, std::abort on a broken invariant, a
// sanitizer report) is a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "io/json_input.hpp"
#include "stepmix/error.hpp"

namespace stepmix::fuzz {

// The input bytes as text (no copy).
inline std::string_view input_text(const uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs one stage of a check: true when it ran through, false when it threw
// stepmix::Error (a clean rejection, swallowed). Stages that must run even
// after an earlier one rejected the input each get their own call.
template <class Stage>
bool run_stage(Stage&& stage) {
  try {
    std::forward<Stage>(stage)();
    return true;
  } catch (const Error&) {
    return false;
  }
}

// The body of LLVMFuzzerTestOneInput for a target that takes the bytes as
// they are: `check(data, size)` runs as one stage.
template <class Check>
int run_fuzz_input(const uint8_t* data, std::size_t size, Check&& check) {
  run_stage([&] { std::forward<Check>(check)(data, size); });
  return 0;
}

// The body of LLVMFuzzerTestOneInput for a target that reads the input as a
// JSON side file. It is parsed as the CLI parses these files (nesting limit,
// then JSON; every parser exception mapped to stepmix::Error); input that
// does not parse is rejected, otherwise `check(json)` runs as one stage.
template <class Check>
int run_fuzz_json(const uint8_t* data, std::size_t size, Check&& check) {
  nlohmann::json json;
  if (!run_stage([&] { json = parse_json_text(input_text(data, size), "fuzz.json", "fuzz"); })) return 0;
  run_stage([&] { std::forward<Check>(check)(std::as_const(json)); });
  return 0;
}

}  // namespace stepmix::fuzz
