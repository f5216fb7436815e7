#include "text/byte_level.hpp"

#include "text/unicode.hpp"

namespace stepmix::text {
namespace {

bool stands_for_itself(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct Alphabet {
  std::array<char32_t, 256> to_char{};
  std::array<int, 512> to_byte{};  // every stand-in is below U+0200
  std::array<std::string, 256> symbols;
  Alphabet() {
    to_byte.fill(-1);
    unsigned next = 0;
    for (unsigned b = 0; b < 256; ++b) {
      to_char[b] = stands_for_itself(b) ? char32_t(b) : char32_t(0x100 + next++);
      to_byte[to_char[b]] = static_cast<int>(b);
      append_utf8(symbols[b], to_char[b]);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

// Decodes one well-formed UTF-8 character at s[i] (vocabulary strings come
// from a JSON parser, which only yields well-formed UTF-8).
char32_t decode_at(std::string_view s, std::size_t i, std::size_t n) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (n == 1) return b0;
  char32_t c = b0 & (0xFF >> (n + 1));
  for (std::size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return c;
}

}  // namespace

char32_t byte_to_char(uint8_t byte) { return alphabet().to_char[byte]; }
const std::array<std::string, 256>& byte_level_symbols() { return alphabet().symbols; }

std::optional<uint8_t> char_to_byte(char32_t c) {
  if (c >= alphabet().to_byte.size() || alphabet().to_byte[c] < 0) return std::nullopt;
  return static_cast<uint8_t>(alphabet().to_byte[c]);
}

void append_token_bytes(std::string& bytes, std::string_view token) {
  const std::size_t mark = bytes.size();
  for (std::size_t i = 0; i < token.size();) {
    const std::size_t n = utf8_char_length(token, i);
    const auto b = char_to_byte(decode_at(token, i, n));
    if (!b) {
      bytes.resize(mark);
      bytes.append(token);
      return;
    }
    bytes += static_cast<char>(*b);
    i += n;
  }
}

}  // namespace stepmix::text
