// stepmix::Error: the component prefix, and messages that survive what()
// whole even when they quote a NUL from a file.
#include "stepmix/error.hpp"

#include <gtest/gtest.h>

#include <string>

namespace stepmix::test {
namespace {

TEST(Error, PrefixesTheComponent) {
  EXPECT_STREQ(Error("safetensors", "bad header").what(), "[safetensors] bad header");
  EXPECT_STREQ(Error("plain").what(), "plain");
}

TEST(Error, SpellsOutNulSoTheMessageIsNotCutShort) {
  const std::string name("a\0b", 3);
  EXPECT_STREQ(Error("safetensors", "tensor '" + name + "' is bad").what(), "[safetensors] tensor 'a\\u0000b' is bad");
  EXPECT_STREQ(Error(name).what(), "a\\u0000b");
}

TEST(Error, SpellsOutControlCharactersQuotedFromFiles) {
  // A dtype string such as "\x1b[2J" would clear the terminal the CLI prints to.
  EXPECT_STREQ(Error("safetensors", "dtype '\x1b[2J\x1b[31mF32'").what(), "[safetensors] dtype '\\u001b[2J\\u001b[31mF32'");
  EXPECT_STREQ(Error("a\nb\tc\rd\x7f").what(), "a\\u000ab\\u0009c\\u000dd\\u007f");
  // C1 controls (U+009B is a one-character CSI on some terminals).
  EXPECT_STREQ(Error("x\xc2\x9b" "2Jy").what(), "x\\u009b2Jy");
}

TEST(Error, KeepsValidUtf8AndSpellsInvalidBytes) {
  EXPECT_STREQ(Error("Größe ≤ 2 · 10⁶ 🙂").what(), "Größe ≤ 2 · 10⁶ 🙂");
  EXPECT_STREQ(Error("\xff\xc3(\xe2\x82").what(), "\\xff\\xc3(\\xe2\\x82");
  // Overlong and surrogate forms are not valid UTF-8.
  EXPECT_STREQ(Error("\xc0\xaf \xed\xa0\x80").what(), "\\xc0\\xaf \\xed\\xa0\\x80");
}

}  // namespace
}  // namespace stepmix::test
