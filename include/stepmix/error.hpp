// stepmix::Error: the one exception type that crosses the public API.
//
// Messages carry their own context, prefixed by the component in brackets, e.g.
//   [safetensors] model.safetensors: tensor 'x' data_offsets [a,b) exceed file size N
// so that the CLI can print what() as a single line and exit with code 2.
#pragma once

#include <stdexcept>
#include <string>

namespace stepmix {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  Error(const std::string& component, const std::string& message)
      : std::runtime_error("[" + component + "] " + message) {}
};

}  // namespace stepmix
