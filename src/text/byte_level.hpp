// The byte-level alphabet of GPT-2-style BPE vocabularies: every byte has a
// printable stand-in character (bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF
// stand for themselves, the other 68 bytes for U+0100 + n in byte order), so
// "Ġ" (U+0120) is the space and "Ċ" (U+010A) the newline of a vocabulary
// entry. The ByteLevel pre-tokenizer maps UTF-8 bytes into this alphabet and
// the ByteLevel decoder maps them back.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace stepmix::text {

// The stand-in character of a byte.
char32_t byte_to_char(uint8_t byte);
// UTF-8 of the stand-in of each byte.
const std::array<std::string, 256>& byte_level_symbols();
// The byte a stand-in character stands for, if it is one.
std::optional<uint8_t> char_to_byte(char32_t c);

// The bytes a vocabulary token stands for; a token with a character outside
// the alphabet contributes its own UTF-8 bytes (as Hugging Face's ByteLevel
// decoder does).
void append_token_bytes(std::string& bytes, std::string_view token);

}  // namespace stepmix::text
