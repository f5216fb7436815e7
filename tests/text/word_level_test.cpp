#include "text/prompt_model.hpp"
#include "text/tokenizer.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "stepmix/error.hpp"

namespace stepmix::text {
namespace {

const char* kTokenizer = R"({
  "version": "1.0",
  "added_tokens": [
    {"id": 0, "content": "[UNK]", "special": true},
    {"id": 1, "content": "<|im_end|>", "special": true},
    {"id": 2, "content": "<|vision_start|>", "special": true}
  ],
  "normalizer": {"type": "Lowercase"},
  "pre_tokenizer": {"type": "Whitespace"},
  "post_processor": null,
  "decoder": null,
  "model": {"type": "WordLevel", "unk_token": "[UNK]",
            "vocab": {"[UNK]": 0, "<|im_end|>": 1, "<|vision_start|>": 2, "a": 3, "photo": 4, "of": 5,
                      "ankle": 6, "boot": 7, "t": 8, "-": 9, "shirt": 10, ",": 11}}
})";

std::string with(const std::string& from, const std::string& to) {
  std::string s = kTokenizer;
  const auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

// The error of loading `json` as a tokenizer and taking its control ids.
std::string error_of(const std::string& json) {
  try {
    PromptModel::from_parts(Tokenizer::from_json_text(json, "tok.json"), nullptr, "", std::nullopt, false);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

PromptModel plain_model(const std::string& json) {
  return PromptModel::from_parts(Tokenizer::from_json_text(json, "tok.json"), nullptr, "", std::nullopt, false);
}

TEST(Tokenizer, WordLevelWithLowercaseAndWhitespace) {
  const Tokenizer tok = Tokenizer::from_json_text(kTokenizer, "tok.json");
  EXPECT_EQ(tok.encode("A photo of an Ankle boot"), (std::vector<int64_t>{3, 4, 5, 0, 6, 7}));
  // Whitespace splits punctuation runs from words (\w+|[^\w\s]+).
  EXPECT_EQ(tok.encode("a T-shirt,  boot"), (std::vector<int64_t>{3, 8, 9, 10, 11, 7}));
  EXPECT_EQ(tok.encode(""), (std::vector<int64_t>{}));
  const PromptModel model = plain_model(kTokenizer);
  EXPECT_EQ(model.style(), PromptStyle::plain);
  EXPECT_EQ(model.understanding_prefix("ankle boot"), (std::vector<int64_t>{6, 7, 1, 2}));
  EXPECT_EQ(model.understanding_prefix(""), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(model.eos_id(), 1);
  EXPECT_EQ(model.vision_start_id(), 2);
  EXPECT_EQ(tok.vocab_size(), 12);
  // A plain model's prompt is encoded as given: no sentences, no template.
  Cosmos3PromptRequest request;
  request.prompt = "a photo of a boot";
  request.negative_prompt = "a shirt";
  const Cosmos3Prompt p = model.build(request);
  EXPECT_EQ(p.positive_rendered, "a photo of a boot");
  EXPECT_EQ(p.positive_ids, (std::vector<int64_t>{3, 4, 5, 3, 7, 1, 2}));
  EXPECT_EQ(p.negative_ids, (std::vector<int64_t>{3, 10, 1, 2}));
}

TEST(Tokenizer, WordLevelReportsUnknownWordsAndTheNearestKnownOnes) {
  const Tokenizer tok = Tokenizer::from_json_text(kTokenizer, "tok.json");
  std::vector<std::string> unknown;
  EXPECT_EQ(tok.encode("A photo of an Ankle bot", &unknown), (std::vector<int64_t>{3, 4, 5, 0, 6, 0}));
  EXPECT_EQ(unknown, (std::vector<std::string>{"an", "bot"}));  // as normalised, in order
  unknown.clear();
  tok.encode("ankle boot", &unknown);
  EXPECT_TRUE(unknown.empty());
  const std::vector<std::string> near = tok.nearest_words("bot", 3);
  ASSERT_EQ(near.size(), 3u);
  EXPECT_EQ(near[0], "boot");  // one edit away; special tokens are never suggested
  for (const std::string& w : near) EXPECT_TRUE(w.find('<') == std::string::npos && w != "[UNK]") << w;
  // Nor for a word far from every entry, where they would be as near as any.
  for (const std::string& w : tok.nearest_words("<|im_en", 20))
    EXPECT_TRUE(w.find("<|") == std::string::npos && w != "[UNK]") << w;
  EXPECT_TRUE(tok.nearest_words(std::string(65, 'x'), 3).empty());
}

TEST(Tokenizer, AddedTokensMatchVerbatimBeforeNormalisation) {
  const Tokenizer tok = Tokenizer::from_json_text(kTokenizer, "tok.json");
  EXPECT_EQ(tok.encode("boot<|im_end|>a"), (std::vector<int64_t>{7, 1, 3}));
  // Case differs: not the added token; lowercased and split as "<|", "im_end", "|>".
  EXPECT_EQ(tok.encode("<|IM_END|>"), (std::vector<int64_t>{0, 0, 0}));
}

TEST(Tokenizer, WhitespaceSplitKeepsPunctuation) {
  const Tokenizer tok = Tokenizer::from_json_text(with(R"("type": "Whitespace")", R"("type": "WhitespaceSplit")"), "t");
  EXPECT_EQ(tok.encode("a t-shirt"), (std::vector<int64_t>{3, 0}));
}

// Unicode as `tokenizers` (Rust) has it: WhitespaceSplit cuts at White_Space
// (U+3000, U+00A0, U+0085; not U+FEFF), Whitespace's \w is Alphabetic, marks,
// decimal digits, connector punctuation and the joiners, and Lowercase maps
// every character on its own (U+212A KELVIN SIGN -> k, U+0130 -> i + U+0307).
TEST(Tokenizer, WordLevelSplitsAndLowersWithUnicodeClasses) {
  nlohmann::json doc = nlohmann::json::parse(kTokenizer);
  auto& vocab = doc["model"]["vocab"];
  vocab["café"] = 12;
  vocab["école"] = 13;
  vocab["—"] = 14;
  vocab["key"] = 15;
  vocab["i\u0307stanbul"] = 16;
  vocab["a\ufeffphoto"] = 17;
  vocab["x_1"] = 18;
  vocab["σοφία"] = 19;
  vocab["οδοσ"] = 20;
  const Tokenizer words = Tokenizer::from_json_text(doc.dump(), "tok.json");
  EXPECT_EQ(words.encode("Café—boot"), (std::vector<int64_t>{12, 14, 7}));
  EXPECT_EQ(words.encode("ÉCOLE \u212Aey \u0130stanbul"), (std::vector<int64_t>{13, 15, 16}));
  EXPECT_EQ(words.encode("x_1 e\u0301"), (std::vector<int64_t>{18, 0}));  // a mark is a word character
  // White_Space separates; other-script digits and the joiners are word characters.
  EXPECT_EQ(words.encode("a\u00a0photo\u3000of\u0085boot"), (std::vector<int64_t>{3, 4, 5, 7}));
  EXPECT_EQ(words.encode("x_\u0661 a\u200dphoto"), (std::vector<int64_t>{0, 0}));  // one word each
  EXPECT_EQ(words.encode("ΣΟΦΊΑ ΣΟΦΙΑ"), (std::vector<int64_t>{19, 0}));  // σοφία; σοφια is no entry
  // A capital sigma at the end of a word lowers to σ as any other (char by
  // char, as Rust's Lowercase does), not to the final form ς.
  EXPECT_EQ(words.encode("ΟΔΟΣ"), (std::vector<int64_t>{20}));
  doc["pre_tokenizer"]["type"] = "WhitespaceSplit";
  const Tokenizer split = Tokenizer::from_json_text(doc.dump(), "tok.json");
  EXPECT_EQ(split.encode("a\u3000photo\u00a0of\u0085a\u2028boot"), (std::vector<int64_t>{3, 4, 5, 3, 7}));
  EXPECT_EQ(split.encode("A\uFEFFphoto"), (std::vector<int64_t>{17}));  // U+FEFF is no White_Space
  EXPECT_EQ(split.encode("Café—boot"), (std::vector<int64_t>{0}));
}

TEST(Tokenizer, UnsupportedOrMalformedFilesAreRejected) {
  EXPECT_NE(error_of(with(R"("type": "WordLevel")", R"("type": "Unigram")")).find("model.type: \"Unigram\" is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(with(R"("type": "Lowercase")", R"("type": "NFKC")")).find("normalizer.type"), std::string::npos);
  EXPECT_NE(error_of(with(R"("type": "Whitespace")", R"("type": "ByteLevel")")).find("pre_tokenizer.type"),
            std::string::npos);
  EXPECT_NE(error_of(with(R"("post_processor": null)", R"("post_processor": {"type": "TemplateProcessing"})"))
                .find("post_processor"),
            std::string::npos);
  EXPECT_NE(error_of(with(R"("ankle": 6)", R"("ankle": -6)")).find("model.vocab.ankle"), std::string::npos);
  EXPECT_NE(error_of(with(R"("unk_token": "[UNK]")", R"("unk_token": "[NOPE]")")).find("unk_token"), std::string::npos);
  nlohmann::json no_vision = nlohmann::json::parse(kTokenizer);
  no_vision["added_tokens"].erase(2);
  no_vision["model"]["vocab"].erase("<|vision_start|>");
  EXPECT_NE(error_of(no_vision.dump()).find("no <|vision_start|> token"), std::string::npos);
  nlohmann::json no_eos = nlohmann::json::parse(kTokenizer);
  no_eos["added_tokens"].erase(1);
  no_eos["model"]["vocab"].erase("<|im_end|>");
  EXPECT_NE(error_of(no_eos.dump()).find("no end-of-text token"), std::string::npos);
  EXPECT_NE(error_of("{").find("tok.json: not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[]").find("expected a JSON object"), std::string::npos);
}

TEST(Tokenizer, IdsAreBoundedSoVocabSizeCannotOverflow) {
  // vocab_size is the largest id + 1: INT64_MAX would overflow it.
  EXPECT_NE(error_of(with(R"("ankle": 6)", R"("ankle": 9223372036854775807)")).find("model.vocab.ankle: expected an integer id in [0, 2147483647]"),
            std::string::npos);
  EXPECT_NE(error_of(with(R"("ankle": 6)", R"("ankle": 18446744073709551615)")).find("model.vocab.ankle"),
            std::string::npos);
  EXPECT_NE(error_of(with(R"({"id": 2, "content")", R"({"id": 9223372036854775807, "content")")).find("added_tokens"),
            std::string::npos);
  const Tokenizer tok = Tokenizer::from_json_text(with(R"("ankle": 6)", R"("ankle": 2147483647)"), "tok.json");
  EXPECT_EQ(tok.vocab_size(), int64_t(1) << 31);
}

TEST(Tokenizer, DeeplyNestedJsonIsRejectedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(error_of(deep).find("tok.json: JSON nested deeper than 64 levels"), std::string::npos) << error_of(deep);
  // Brackets inside strings are text, not nesting.
  const Tokenizer tok = Tokenizer::from_json_text(with(R"("a": 3)", "\"" + std::string(70, '[') + "\": 3"), "tok.json");
  EXPECT_EQ(tok.token_id(std::string(70, '[')), 3);
}

TEST(Tokenizer, UnknownWordWithoutUnkTokenIsAnError) {
  const Tokenizer tok = Tokenizer::from_json_text(with(R"("unk_token": "[UNK]")", R"("unk_token": null)"), "tok.json");
  try {
    tok.encode("zebra");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"zebra\" is not in the vocabulary"), std::string::npos);
  }
}

}  // namespace
}  // namespace stepmix::text
