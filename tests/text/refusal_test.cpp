// Everything in a tokenizer.json that stepmix does not implement is refused
// with an error naming the field: one file per refused feature, each a
// small byte-level tokenizer that loads until that one setting is changed.
#include <gtest/gtest.h>

#include <functional>

#include "common/error_of.hpp"
#include "text/tokenizer.hpp"
#include "tiny_bpe.hpp"

namespace stepmix::text {
namespace {

using json = nlohmann::json;

struct Refusal {
  const char* what;
  std::function<void(json&)> edit;
  const char* message;
};

const Refusal kRefusals[] = {
    {"another model", [](json& d) { d["model"]["type"] = "WordPiece"; }, "model.type: \"WordPiece\" is not supported"},
    {"BPE dropout", [](json& d) { d["model"]["dropout"] = 0.1; }, "model.dropout: expected null, got 0.1"},
    {"an unk token", [](json& d) { d["model"]["unk_token"] = "<unk>"; }, "model.unk_token: expected null"},
    {"a subword prefix", [](json& d) { d["model"]["continuing_subword_prefix"] = "##"; }, "model.continuing_subword_prefix"},
    {"a word suffix", [](json& d) { d["model"]["end_of_word_suffix"] = "</w>"; }, "model.end_of_word_suffix"},
    {"byte fallback", [](json& d) { d["model"]["byte_fallback"] = true; }, "model.byte_fallback: expected false, got true"},
    {"ignore_merges", [](json& d) { d["model"]["ignore_merges"] = true; }, "model.ignore_merges: expected false"},
    {"an unknown model field", [](json& d) { d["model"]["cache_capacity"] = 10; }, "model.cache_capacity: not supported"},
    {"a byte missing from the vocabulary", [](json& d) { d["model"]["vocab"].erase("a"); },
     "model.vocab: no entry for byte 0x61"},
    {"a merge of unknown tokens", [](json& d) { d["model"]["merges"].push_back({"zz", "q"}); },
     "model.merges[1]: left part \"zz\" is not in the vocabulary"},
    {"a merge whose result is missing", [](json& d) { d["model"]["merges"].push_back({"b", "c"}); },
     "model.merges[1]: the merged token \"bc\" is not in the vocabulary"},
    {"a malformed merge", [](json& d) { d["model"]["merges"].push_back("a  b"); }, "model.merges[1]: expected \"a b\""},
    {"another normaliser", [](json& d) { d["normalizer"] = {{"type", "NFKC"}}; }, "normalizer.type: \"NFKC\" is not supported"},
    {"a normaliser inside a Sequence", [](json& d) { d["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}}; },
     "normalizer.normalizers[1].type: \"Lowercase\" is not supported"},
    {"another pre-tokenizer", [](json& d) { d["pre_tokenizer"] = {{"type", "Metaspace"}}; }, "pre_tokenizer.type: \"Metaspace\""},
    {"a Split that removes", [](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; },
     "pre_tokenizer.pretokenizers[0].behavior: expected \"Isolated\", got \"Removed\""},
    {"an inverted Split", [](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["invert"] = true; },
     "pre_tokenizer.pretokenizers[0].invert: expected false"},
    {"a String pattern", [](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"String", " "}}; },
     "pre_tokenizer.pretokenizers[0].pattern: expected {\"Regex\": \"...\"} (String patterns are not supported)"},
    {"a regex Oniguruma cannot compile", [](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(a"; },
     "pre_tokenizer.pretokenizers[0].pattern.Regex: not a valid regular expression"},
    {"a prefix space", [](json& d) { d["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true; },
     "pre_tokenizer.pretokenizers[1].add_prefix_space: expected false"},
    {"ByteLevel's own regex", [](json& d) { d["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true; },
     "pre_tokenizer.pretokenizers[1].use_regex: expected false"},
    {"ByteLevel before a Split", [](json& d) { std::swap(d["pre_tokenizer"]["pretokenizers"][0], d["pre_tokenizer"]["pretokenizers"][1]); },
     "pre_tokenizer.pretokenizers[0].type: \"ByteLevel\" is not supported here"},
    {"a post-processor that adds tokens", [](json& d) { d["post_processor"] = {{"type", "TemplateProcessing"}}; },
     "post_processor.type: \"TemplateProcessing\" is not supported"},
    {"another decoder", [](json& d) { d["decoder"] = {{"type", "Metaspace"}}; }, "decoder.type: \"Metaspace\" is not supported"},
    {"no decoder", [](json& d) { d["decoder"] = nullptr; }, "decoder: expected an object with a \"type\", got null"},
    {"truncation", [](json& d) { d["truncation"] = {{"max_length", 8}}; }, "truncation: expected null"},
    {"padding", [](json& d) { d["padding"] = {{"length", 8}}; }, "padding: expected null"},
    {"an unknown top-level field", [](json& d) { d["extra"] = 1; }, "extra: not supported"},
    {"an unknown added-token field", [](json& d) { d["added_tokens"][0]["weight"] = 1; }, "added_tokens[0].weight: not supported"},
    {"an added token given twice", [](json& d) { d["added_tokens"].push_back(test::added_token(301, "<s>")); },
     "added_tokens[1].content: \"<s>\" is added twice"},
    {"an added token on another token's id", [](json& d) { d["added_tokens"].push_back(test::added_token(97, "<a>")); },
     "added_tokens[1].id: 97 is the vocabulary's \"a\", not \"<a>\""},
    {"an added-token flag that is not a boolean", [](json& d) { d["added_tokens"][0]["lstrip"] = "yes"; },
     "added_tokens[0].lstrip: expected a boolean"},
};

TEST(Refusal, EveryUnsupportedSettingIsNamed) {
  const json base = test::tiny_bpe({{"a", "b"}}, json::array({test::added_token(300, "<s>")}));
  ASSERT_NO_THROW(Tokenizer::from_json_text(base.dump(), "tok.json"));
  for (const Refusal& r : kRefusals) {
    json doc = base;
    r.edit(doc);
    const std::string error = test::error_of([&] { Tokenizer::from_json_text(doc.dump(), "tok.json"); });
    EXPECT_NE(error.find(std::string("[tokenizer] tok.json: ") + r.message), std::string::npos)
        << r.what << ": got \"" << error << "\"";
  }
}

}  // namespace
}  // namespace stepmix::text
