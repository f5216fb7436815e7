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
  explicit Error(const std::string& message) : std::runtime_error(visible(message)) {}
  Error(const std::string& component, const std::string& message)
      : std::runtime_error("[" + component + "] " + visible(message)) {}

 private:
  // what() is a C string: a NUL quoted from a file (a tensor name such as
  // "a\u0000b") would cut the message short, so it is spelled out.
  static std::string visible(const std::string& message) {
    std::string out;
    for (char c : message) {
      if (c == '\0')
        out += "\\u0000";
      else
        out += c;
    }
    return out;
  }
};

}  // namespace stepmix
