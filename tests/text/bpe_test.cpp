// Byte-level BPE on small hand-made tokenizers: merge order, both merge
// serialisations, the merge loop against its plain twin, Split steps, added
// token flags and decoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "stepmix/error.hpp"
#include "text/bpe.hpp"
#include "text/tokenizer.hpp"
#include "tiny_bpe.hpp"

namespace stepmix::text {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int64_t>;
using test::tiny_bpe;

Tokenizer load(const json& doc) { return Tokenizer::from_json_text(doc.dump(), "tiny/tokenizer.json"); }

TEST(Bpe, MergesApplyLowestRankFirst) {
  // "hel": (e, l) has rank 0, so "el" forms before "he" could.
  EXPECT_EQ(load(tiny_bpe({{"e", "l"}, {"h", "e"}})).encode("hel"), (Ids{'h', 256}));
  EXPECT_EQ(load(tiny_bpe({{"h", "e"}, {"e", "l"}})).encode("hel"), (Ids{256, 'l'}));
  // A chain: lo, he, hel, hello (ids 256..259).
  const Tokenizer t = load(tiny_bpe({{"l", "o"}, {"h", "e"}, {"he", "l"}, {"hel", "lo"}}));
  EXPECT_EQ(t.encode("hello"), (Ids{259}));
  EXPECT_EQ(t.encode("hello hello"), (Ids{259, ' ', 259}));  // " hello": no merge with Ġ
  // Equal ranks are taken leftmost first: "aaa" is "aa" + "a".
  EXPECT_EQ(load(tiny_bpe({{"a", "a"}})).encode("aaa"), (Ids{256, 'a'}));
}

TEST(Bpe, MergesAsStringsOrPairsGiveTheSameIds) {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"Ġ", "in"}, {"Ġin", "g"}, {"Ġ", "Ġ"}, {"ĠĠ", "ĠĠ"}};
  const json pairs = tiny_bpe(merges);
  json strings = pairs;
  for (json& m : strings["model"]["merges"]) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  ASSERT_TRUE(strings["model"]["merges"][0].is_string());
  const Tokenizer a = load(pairs), b = load(strings);
  for (const char* text : {"the thing in the ring", "        eight spaces", "ing ing\n\ting", ""})
    EXPECT_EQ(a.encode(text), b.encode(text)) << text;
  EXPECT_EQ(a.encode(" the"), (Ids{258}));
}

// merge() (heap, stale entries skipped) against merge_reference() (rescan
// for the lowest rank each time) on random merge tables over a 3-letter
// alphabet, with ranks unrelated to the order in which tokens were formed.
TEST(Bpe, MergeLoopMatchesItsPlainTwin) {
  std::mt19937 rng(7);
  for (int table = 0; table < 20; ++table) {
    int32_t byte_ids[256];
    for (int b = 0; b < 256; ++b) byte_ids[b] = b;
    std::vector<int32_t> symbols = {'a', 'b', 'c'};
    std::vector<std::pair<int32_t, int32_t>> pairs;
    MergeTable merges;
    std::set<std::pair<int32_t, int32_t>> seen;
    for (int32_t next = 256; next < 256 + 60;) {
      const int32_t l = symbols[rng() % symbols.size()], r = symbols[rng() % symbols.size()];
      if (!seen.insert({l, r}).second) continue;
      pairs.emplace_back(l, r);
      symbols.push_back(next++);
    }
    std::vector<uint32_t> ranks(pairs.size());
    std::iota(ranks.begin(), ranks.end(), 0u);
    std::shuffle(ranks.begin(), ranks.end(), rng);
    for (std::size_t i = 0; i < pairs.size(); ++i)
      merges.insert(pairs[i].first, pairs[i].second, MergeEntry{ranks[i], int32_t(256 + i)});
    const BpeModel model(std::move(merges), byte_ids);
    for (int word = 0; word < 300; ++word) {
      std::string w(1 + rng() % 40, 'a');
      for (char& c : w) c = char('a' + rng() % 3);
      std::vector<int32_t> fast, plain;
      model.merge(w, fast);
      model.merge_reference(w, plain);
      ASSERT_EQ(fast, plain) << "table " << table << ", word " << w;
    }
  }
}

TEST(Bpe, SplitStepsRunInOrderAndEmptyMatchesStillSplit) {
  json doc = tiny_bpe({{"a", "b"}});
  EXPECT_EQ(load(doc).encode("xab"), (Ids{'x', 256}));  // one Qwen pre-token
  doc["pre_tokenizer"]["pretokenizers"] = {test::split_step("x"), test::split_step("b"), test::byte_level_step()};
  EXPECT_EQ(load(doc).encode("xab"), (Ids{'x', 'a', 'b'}));
  // An empty match (a lookahead) is a split point: "a" | "b".
  doc["pre_tokenizer"]["pretokenizers"] = {test::split_step("(?=b)"), test::byte_level_step()};
  EXPECT_EQ(load(doc).encode("ab"), (Ids{'a', 'b'}));
  doc["pre_tokenizer"] = test::byte_level_step();  // ByteLevel alone: the whole text is one word
  EXPECT_EQ(load(doc).encode("ab ab"), (Ids{256, ' ', 256}));
}

TEST(Bpe, AddedTokensAreMatchedLeftmostLongestWithTheirFlags) {
  json added = json::array({test::added_token(300, "<x>"), test::added_token(301, "<x><y>", false)});
  json lstrip = test::added_token(302, "[L]");
  lstrip["lstrip"] = true;
  json rstrip = test::added_token(303, "[R]");
  rstrip["rstrip"] = true;
  json word = test::added_token(304, "cat", false);
  word["single_word"] = true;
  json normalized = test::added_token(305, "e\xCC\x81", false);  // decomposed é: its content is normalised too
  normalized["normalized"] = true;
  json raw = test::added_token(306, "\xC3\xB1", false);  // precomposed ñ, matched in the raw text only
  for (const json& a : {lstrip, rstrip, word, normalized, raw}) added.push_back(a);
  const Tokenizer t = load(tiny_bpe({}, added));

  EXPECT_EQ(t.encode("a<x><y>b<x>"), (Ids{'a', 301, 'b', 300}));
  EXPECT_EQ(t.encode("<x<x>>"), (Ids{'<', 'x', 300, '>'}));
  EXPECT_EQ(t.encode("a  [L]b"), (Ids{'a', 302, 'b'}));       // takes the spaces before it
  EXPECT_EQ(t.encode("a[R] \t b"), (Ids{'a', 303, 'b'}));     // and after it
  EXPECT_EQ(t.encode("a cat."), (Ids{'a', ' ', 304, '.'}));   // a word on its own
  EXPECT_EQ(t.encode("cats"), (Ids{'c', 'a', 't', 's'}));     // not inside a word
  EXPECT_EQ(t.encode("concat"), (Ids{'c', 'o', 'n', 'c', 'a', 't'}));
  EXPECT_EQ(t.encode("caf\xC3\xA9"), (Ids{'c', 'a', 'f', 305}));        // é
  EXPECT_EQ(t.encode("cafe\xCC\x81"), (Ids{'c', 'a', 'f', 305}));       // e + U+0301, NFC first
  EXPECT_EQ(t.encode("\xC3\xB1"), (Ids{306}));
  EXPECT_EQ(t.encode("n\xCC\x83"), (Ids{0xC3, 0xB1}));  // NFC makes ñ, but after raw matching

  EXPECT_EQ(t.decode(Ids{'a', 300, 301, 'b'}, false), "a<x><x><y>b");
  EXPECT_EQ(t.decode(Ids{'a', 300, 301, 'b'}, true), "a<x><y>b");  // only special tokens are skipped
  // An added token ends the byte stream; skipped, the bytes join up.
  EXPECT_EQ(t.decode(Ids{0xE2, 0x82, 300, 0xAC}, false), "\xEF\xBF\xBD<x>\xEF\xBF\xBD");
  EXPECT_EQ(t.decode(Ids{0xE2, 0x82, 300, 0xAC}, true), "\xE2\x82\xAC");
  EXPECT_THROW(t.decode(Ids{999}, false), Error);
  EXPECT_THROW(t.decode(Ids{-1}, false), Error);
  EXPECT_EQ(t.token_id("<x><y>"), 301);
  EXPECT_EQ(t.vocab_size(), 307);
}

TEST(Bpe, TextMustBeWellFormedUtf8) {
  const Tokenizer t = load(tiny_bpe({}));
  try {
    t.encode("ok \xFF");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8 (byte 3)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(t.encode(std::string("a\0b", 3)), (Ids{'a', 0, 'b'}));
}

}  // namespace
}  // namespace stepmix::text
