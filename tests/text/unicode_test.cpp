// NFC (against its whole-text twin), UTF-8 validation and lossy decoding,
// the Oniguruma wrapper and the character classes of the added-token flags.
#include <gtest/gtest.h>

#include <random>

#include "stepmix/error.hpp"
#include "text/byte_level.hpp"
#include "text/unicode.hpp"

namespace stepmix::text {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

TEST(Unicode, NfcComposesCanonicallyOnly) {
  EXPECT_EQ(nfc("cafe\xCC\x81"), "caf\xC3\xA9");        // e + U+0301 -> é
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");           // U+212B ANGSTROM SIGN -> Å
  EXPECT_EQ(nfc("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");  // U+0958 is decomposed (exclusion)
  EXPECT_EQ(nfc("\xEF\xAC\x81"), "\xEF\xAC\x81");       // ﬁ: compatibility forms stay
  EXPECT_EQ(nfc("a\xCC\xA3\xCC\x81"), nfc("a\xCC\x81\xCC\xA3"));  // marks reordered by class
  EXPECT_EQ(nfc(std::string("a\0b", 3)), std::string("a\0b", 3));
  EXPECT_EQ(nfc(""), "");
}

// Hangul: L + V and LV + T compose, but U+11A7 (the filler below the first
// trailing consonant U+11A8) is no T and stays, as the reference keeps it.
TEST(Unicode, NfcKeepsTheHangulFillerAfterASyllable) {
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80");  // U+1100 U+1161 -> U+AC00
  EXPECT_EQ(nfc("\xEA\xB0\x80\xE1\x86\xA8"), "\xEA\xB0\x81");  // U+AC00 U+11A8 -> U+AC01
  EXPECT_EQ(nfc("\xEA\xB0\x80\xE1\x86\xA7"), "\xEA\xB0\x80\xE1\x86\xA7");
  EXPECT_EQ(nfc_whole("\xEA\xB0\x80\xE1\x86\xA7"), "\xEA\xB0\x80\xE1\x86\xA7");
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA7x"), "\xEA\xB0\x80\xE1\x86\xA7x");
  // Fillers in a row, at the ends, and marks around them still normalised.
  EXPECT_EQ(nfc("\xE1\x86\xA7\xE1\x86\xA7"
                "a\xCC\x81\xE1\x86\xA7"),
            "\xE1\x86\xA7\xE1\x86\xA7\xC3\xA1\xE1\x86\xA7");
  // Marks after a filler are reordered by class and stay after it; a T after
  // a filler does not reach back over it to the syllable.
  EXPECT_EQ(nfc("\xE1\x86\xA7\xCC\x81\xCC\xA3"), "\xE1\x86\xA7\xCC\xA3\xCC\x81");
  EXPECT_EQ(nfc("\xEA\xB0\x80\xE1\x86\xA7\xE1\x86\xA8"), "\xEA\xB0\x80\xE1\x86\xA7\xE1\x86\xA8");
}

// nfc() sends only the non-ASCII stretches (plus the ASCII character before
// each) through utf8proc; on random mixtures of starters, combining marks,
// conjoining jamo, singletons and ASCII it must equal one call on the whole.
TEST(Unicode, NfcOfStretchesEqualsNfcOfTheWholeText) {
  // clang-format off
  const std::vector<std::string> pieces = {
      "a", "e", "A", " ", ".", "\n", "\xCC\x81", "\xCC\xA3", "\xCD\x85", "\xE1\x84\x80", "\xE1\x85\xA1", "\xE1\x86\xA8",
      "\xEA\xB0\x80", "\xE2\x84\xAB", "\xE0\xA5\x98", "\xC3\xA9", "\xE0\xBD\xB3", "\xE0\xAD\x87", "\xE0\xAC\xBE", "<",
      "\xCC\xB8", "\xF0\x9F\x98\x80", "\xEF\xAC\x81", "\xE1\x86\xA7"};  // the last: U+11A7
  // clang-format on
  std::mt19937 rng(3);
  for (int i = 0; i < 5000; ++i) {
    std::string s;
    const int n = 1 + int(rng() % 12);
    for (int k = 0; k < n; ++k) s += pieces[rng() % pieces.size()];
    ASSERT_EQ(nfc(s), nfc_whole(s)) << s;
    // Both share the U+11A7 workaround: no filler may be lost by either.
    const auto fillers = [](const std::string& t) {
      std::size_t count = 0;
      for (std::size_t at = t.find("\xE1\x86\xA7"); at != std::string::npos; at = t.find("\xE1\x86\xA7", at + 3))
        ++count;
      return count;
    };
    ASSERT_EQ(fillers(nfc(s)), fillers(s)) << s;
  }
}

TEST(Unicode, Utf8ValidationFindsTheFirstIllFormedByte) {
  EXPECT_EQ(first_invalid_utf8("plain \xC3\xA9 \xF0\x9F\x98\x80"), std::string_view::npos);
  EXPECT_EQ(first_invalid_utf8("ab\xC0\xAF"), 2u);          // overlong
  EXPECT_EQ(first_invalid_utf8("a\xED\xA0\x80"), 1u);       // a surrogate
  EXPECT_EQ(first_invalid_utf8("\xF4\x90\x80\x80"), 0u);    // above U+10FFFF
  EXPECT_EQ(first_invalid_utf8("abc\xE2\x82"), 3u);         // cut short
  EXPECT_EQ(first_invalid_utf8("\x80"), 0u);                // a lone continuation byte
}

TEST(Unicode, LossyDecodingReplacesEachMaximalIllFormedSubpart) {
  EXPECT_EQ(utf8_lossy("\xE2\x82"), kReplacement);
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), kReplacement);
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), kReplacement + kReplacement);
  EXPECT_EQ(utf8_lossy("a\xE2\x82\xACz"), "a\xE2\x82\xACz");
  EXPECT_EQ(utf8_lossy("\xE2\x82x"), kReplacement + "x");
}

TEST(Unicode, RegexIteratesMatchesLikeTheOnigCrate) {
  std::vector<std::pair<std::size_t, std::size_t>> m;
  Regex(R"(\p{N})", "test", "digits").find_all("a12b3", m);
  EXPECT_EQ(m, (std::vector<std::pair<std::size_t, std::size_t>>{{1, 2}, {2, 3}, {4, 5}}));
  // An empty match right after the previous match moves on one character.
  Regex("x*", "test", "x*").find_all("axxb", m);
  EXPECT_EQ(m, (std::vector<std::pair<std::size_t, std::size_t>>{{0, 0}, {1, 3}, {4, 4}}));
  Regex("(?=b)", "test", "lookahead").find_all("ab\xC3\xA9" "b", m);
  EXPECT_EQ(m, (std::vector<std::pair<std::size_t, std::size_t>>{{1, 1}, {4, 4}}));
  try {
    Regex("(unclosed", "tokenizer", "tok.json: pre_tokenizer.pattern.Regex");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tok.json: pre_tokenizer.pattern.Regex: not a valid regular expression"),
              std::string::npos)
        << e.what();
  }
}

TEST(Unicode, WordAndSpaceClassesFollowTheUnicodeProperties) {
  EXPECT_TRUE(word_char_at("\xC3\xA9", 0));       // é: Alphabetic
  EXPECT_TRUE(word_char_at("_", 0));
  EXPECT_TRUE(word_char_at("\xD9\xA3", 0));       // ARABIC-INDIC DIGIT THREE: Numeric
  EXPECT_FALSE(word_char_at("-", 0));
  EXPECT_TRUE(word_char_before("a\xC3\xA9", 3));
  EXPECT_FALSE(word_char_before("a ", 2));
  EXPECT_TRUE(white_space_at("\xE3\x80\x80", 0));  // U+3000
  EXPECT_TRUE(white_space_at("\xC2\x85", 0));      // U+0085
  EXPECT_FALSE(white_space_at("\xE2\x80\x8B", 0)); // U+200B ZERO WIDTH SPACE is not White_Space
}

TEST(ByteLevel, EveryByteHasOneStandInAndBack) {
  EXPECT_EQ(byte_level_symbols()[' '], "\xC4\xA0");   // Ġ
  EXPECT_EQ(byte_level_symbols()['\n'], "\xC4\x8A");  // Ċ
  EXPECT_EQ(byte_level_symbols()['a'], "a");
  for (int b = 0; b < 256; ++b) EXPECT_EQ(char_to_byte(byte_to_char(uint8_t(b))), uint8_t(b));
  std::string bytes;
  append_token_bytes(bytes, "\xC4\xA0hi");
  EXPECT_EQ(bytes, " hi");
  bytes.clear();
  append_token_bytes(bytes, "\xE2\x82\xAC!");  // € is no stand-in: the token's own bytes
  EXPECT_EQ(bytes, "\xE2\x82\xAC!");
}

}  // namespace
}  // namespace stepmix::text
