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

// Numbers read as %g, with the digits needed to give the value back: a value
// just outside a limit must not print as the limit.
TEST(Error, NumbersAreShortButNeverRoundedOntoAnotherValue) {
  EXPECT_EQ(Error::number(0.5), "0.5");
  EXPECT_EQ(Error::number(1e-7), "1e-07");
  EXPECT_EQ(Error::number(1000.0), "1000");
  EXPECT_EQ(Error::number(1000), "1000");
  EXPECT_EQ(Error::number(23.976), "23.976");
  EXPECT_EQ(Error::number(0.1), "0.1");
  EXPECT_EQ(Error::number(0.009999999999999998), "0.009999999999999998");
  EXPECT_EQ(Error::number(1000.0000000000001), "1000.0000000000001");
  EXPECT_EQ(Error::number(1.0 / 0.0), "inf");
  EXPECT_EQ(Error::number(-1.0 / 0.0), "-inf");
  EXPECT_EQ(Error::number(0.0 / 0.0).find("nan") != std::string::npos, true);
  // A float keeps the digits of a float.
  EXPECT_EQ(Error::number(0.1f), "0.1");
  EXPECT_EQ(Error::number(3e38f), "3e+38");
  EXPECT_EQ(Error::number(0x1p-64f), "5.421011e-20");
  EXPECT_EQ(Error::number(16777217.0f), "16777216");
}

}  // namespace
}  // namespace stepmix::test
