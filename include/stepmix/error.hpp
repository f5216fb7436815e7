// stepmix::Error: the one exception type that crosses the public API.
//
// Messages carry their own context, prefixed by the component in brackets, e.g.
//   [safetensors] model.safetensors: tensor 'x' data_offsets [a,b) exceed the data area of N bytes
// so that the CLI can print what() as a single line and exit with code 2.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace stepmix {

namespace detail {
// Length of the valid UTF-8 sequence starting at s (lead byte >= 0x80), or 0
// when it is not one (overlong forms, surrogates and code points above
// U+10FFFF are not).
inline std::size_t utf8_sequence_length(const unsigned char* s, std::size_t available) {
  std::size_t length;
  unsigned long cp;
  if (s[0] >= 0xC2 && s[0] <= 0xDF) {
    length = 2;
    cp = s[0] & 0x1Fu;
  } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
    length = 3;
    cp = s[0] & 0x0Fu;
  } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
    length = 4;
    cp = s[0] & 0x07u;
  } else {
    return 0;
  }
  if (length > available) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if ((s[k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[k] & 0x3Fu);
  }
  if ((length == 3 && cp < 0x800) || (length == 4 && cp < 0x10000) || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
    return 0;
  return length;
}
}  // namespace detail

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(visible(message)) {}
  Error(const std::string& component, const std::string& message)
      : std::runtime_error("[" + component + "] " + visible(message)) {}

  // A number as a message quotes it: "%g" (1e-07, 0.5, 1000, inf), where
  // std::to_string would print 1e-07 as 0.000000, with more digits when six
  // would not give the value back (0.009999999999999998 next to a limit of
  // 0.01 must not read as 0.01).
  static std::string number(double v) {
    char text[32];
    for (int digits = 6; digits <= 17; ++digits) {
      std::snprintf(text, sizeof text, "%.*g", digits, v);
      if (v != v || std::strtod(text, nullptr) == v) break;
    }
    return text;
  }
  // A float with the digits that give the float back (0.1f reads 0.1, not
  // the 0.10000000149011612 of its double).
  static std::string number(float v) {
    char text[32];
    for (int digits = 6; digits <= 9; ++digits) {
      std::snprintf(text, sizeof text, "%.*g", digits, double(v));
      if (v != v || std::strtof(text, nullptr) == v) break;
    }
    return text;
  }
  // An integer as it is (without this, number(3) would not know which of the
  // two above to take).
  template <typename Integer, std::enable_if_t<std::is_integral_v<Integer>, int> = 0>
  static std::string number(Integer v) {
    return std::to_string(v);
  }

  // Messages quote names and values from files, which may hold anything.
  // what() must stay one harmless line on a terminal: control characters
  // (C0 such as NUL, ESC, newline; DEL; the C1 range U+0080..U+009F, which
  // some terminals obey as well) are spelled \u001b; bytes that are not
  // valid UTF-8 are spelled \xNN. Valid UTF-8 text is kept as it is.
  static std::string visible(const std::string& message) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    out.reserve(message.size());
    const auto* s = reinterpret_cast<const unsigned char*>(message.data());
    const std::size_t n = message.size();
    for (std::size_t i = 0; i < n;) {
      const unsigned char c = s[i];
      if (c < 0x20 || c == 0x7F) {
        out += "\\u00";
        out += hex[c >> 4];
        out += hex[c & 15];
        ++i;
        continue;
      }
      if (c < 0x80) {
        out += char(c);
        ++i;
        continue;
      }
      const std::size_t length = detail::utf8_sequence_length(s + i, n - i);
      if (length == 0) {
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 15];
        ++i;
      } else if (c == 0xC2 && s[i + 1] < 0xA0) {  // U+0080..U+009F
        out += "\\u00";
        out += hex[s[i + 1] >> 4];
        out += hex[s[i + 1] & 15];
        i += 2;
      } else {
        out.append(message, i, length);
        i += length;
      }
    }
    return out;
  }
};

}  // namespace stepmix
