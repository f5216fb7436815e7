// Every case of the Qwen3 tokenizer goldens, compared exactly: 593 encodes,
// 36 decodes and 53 Cosmos3 prompts (tests/data/golden/qwen3-tokenizer).
// Each test reports every failing case, not only the first.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "common/error_of.hpp"
#include "qwen3_fixture.hpp"
#include "text/chat_template.hpp"
#include "text/prompt_model.hpp"
#include "text/tokenizer.hpp"

namespace stepmix::text {
namespace {

using json = nlohmann::json;
using test::qwen3_path;
using test::read_jsonl;

const Tokenizer& qwen3() {
  static const Tokenizer tok = Tokenizer::from_json_text(test::qwen3_tokenizer_json(), "qwen3/tokenizer.json");
  return tok;
}

// The request part of a prompt case (the rest is expected output).
json request_fields(const json& c) {
  json r;
  for (const char* key : {"id", "note", "mode", "prompt", "negative_prompt", "height", "width", "num_frames", "fps",
                          "use_system_prompt", "resolution_sentence", "duration_sentence"})
    r[key] = c[key];
  return r;
}

TEST(Qwen3Golden, TokenizerIsTheFileTheGoldensWereMadeWith) {
  const json manifest = json::parse(std::ifstream(qwen3_path("MANIFEST.json")));
  EXPECT_EQ(sha256_hex(test::qwen3_tokenizer_json()), manifest["files"]["text_tokenizer/tokenizer.json"]["sha256"]);
  EXPECT_EQ(test::qwen3_tokenizer_json().size(), manifest["files"]["text_tokenizer/tokenizer.json"]["bytes"]);
}

TEST(Qwen3Golden, EveryEncodeCase) {
  const auto cases = read_jsonl(qwen3_path("encode.jsonl"));
  ASSERT_EQ(cases.size(), 593u);
  std::map<std::string, int> failures;
  for (const json& c : cases) {
    const auto ids = qwen3().encode(c["text"].get<std::string>());
    const auto expected = c["ids"].get<std::vector<int64_t>>();
    if (ids != expected) {
      ++failures[c["category"]];
      ADD_FAILURE() << c["id"] << " (" << c["category"] << "): got " << json(ids).dump() << ", expected "
                    << json(expected).dump();
    }
  }
  EXPECT_TRUE(failures.empty()) << json(failures).dump();
}

// U+11A7 after a Hangul syllable stays a character of its own (utf8proc 2.8's
// NFC deleted it). Ids from @huggingface/tokenizers 0.2.0, the goldens'
// reference, on the same tokenizer.json.
TEST(Qwen3Golden, TheHangulFillerAfterASyllableIsKept) {
  const std::vector<std::pair<std::string, std::vector<int64_t>>> cases = {
      {"\xEA\xB0\x80\xE1\x86\xA7", {19969, 124137, 100}},               // U+AC00 U+11A7
      {"\xEB\x81\xBC\xE1\x86\xA7", {142063, 124137, 100}},              // U+B07C U+11A7
      {"\xE1\x84\x85\xE1\x85\xA8\xE1\x86\xA7", {131000, 124137, 100}},  // U+1105 U+1168 U+11A7
      {"\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA7\xE1\x86\xA8 x\xE1\x86\xA7",
       {19969, 124137, 100, 147979, 856, 124137, 100}}};
  for (const auto& [text, ids] : cases) EXPECT_EQ(qwen3().encode(text), ids) << json(text).dump();
}

TEST(Qwen3Golden, EveryDecodeCase) {
  const auto cases = read_jsonl(qwen3_path("decode.jsonl"));
  ASSERT_EQ(cases.size(), 36u);
  for (const json& c : cases) {
    const auto ids = c["ids"].get<std::vector<int64_t>>();
    EXPECT_EQ(qwen3().decode(ids, false), c["text"].get<std::string>()) << c["id"] << ": " << c["note"];
    EXPECT_EQ(qwen3().decode(ids, true), c["text_skip_special_tokens"].get<std::string>()) << c["id"] << ": " << c["note"];
  }
}

// Read from the files, not assumed.
void expect_control_ids(const PromptModel& model) {
  EXPECT_EQ(model.eos_id(), 151645);  // tokenizer_config.json eos_token <|im_end|>
  EXPECT_EQ(model.vision_start_id(), 151652);
  EXPECT_EQ(model.tokenizer().vocab_size(), 151669);
  EXPECT_EQ(model.tokenizer().model_kind(), ModelKind::bpe);
  EXPECT_TRUE(model.default_use_system_prompt());  // a bare tokenizer folder: no model_index.json
}

TEST(Qwen3Golden, EveryPromptCase) {
  const PromptModel model = PromptModel::open(test::Qwen3Folder::path());
  ASSERT_TRUE(model.is_cosmos3_chat());
  ASSERT_TRUE(model.chat_template());
  EXPECT_EQ(model.chat_template()->name, "Qwen3-VL-Instruct");
  expect_control_ids(model);
  const auto cases = read_jsonl(qwen3_path("prompts.jsonl"));
  ASSERT_EQ(cases.size(), 53u);
  int refused = 0;
  for (const json& c : cases) {
    const std::string id = c["id"];
    const Cosmos3PromptRequest request = cosmos3_request_from_json(request_fields(c), id);
    if (c["positive_len"].get<std::size_t>() > kMaxPromptIds) {
      // Built as the reference does, then refused for its length.
      const std::string error = test::error_of([&] { model.build(request); });
      EXPECT_NE(error.find("positive prompt: " + std::to_string(c["positive_len"].get<int>()) + " token ids, more than the 4096"),
                std::string::npos)
          << id << ": " << error;
      ++refused;
      continue;
    }
    Cosmos3Prompt p;
    ASSERT_NO_THROW(p = model.build(request)) << id;
    EXPECT_EQ(p.positive_text, c["positive_text"].get<std::string>()) << id;
    EXPECT_EQ(p.negative_text, c["negative_text"].get<std::string>()) << id;
    EXPECT_EQ(p.positive_rendered, c["positive_rendered"].get<std::string>()) << id;
    EXPECT_EQ(p.negative_rendered, c["negative_rendered"].get<std::string>()) << id;
    EXPECT_EQ(p.positive_ids, c["positive_ids"].get<std::vector<int64_t>>()) << id;
    EXPECT_EQ(p.negative_ids, c["negative_ids"].get<std::vector<int64_t>>()) << id;
    EXPECT_EQ(p.system_prompt.value_or("<none>"), c["system_prompt"].is_null() ? "<none>" : c["system_prompt"].get<std::string>())
        << id;
  }
  EXPECT_EQ(refused, 1);
}

// The older serialisation writes each merge as one "a b" string; both forms
// must give the same tokenizer.
TEST(Qwen3Golden, MergesAsStringsGiveTheSameIds) {
  json doc = json::parse(test::qwen3_tokenizer_json());
  for (json& m : doc["model"]["merges"]) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  const Tokenizer legacy = Tokenizer::from_json_text(doc.dump(), "qwen3-legacy-merges/tokenizer.json");
  for (const json& c : read_jsonl(qwen3_path("encode.jsonl")))
    EXPECT_EQ(legacy.encode(c["text"].get<std::string>()), c["ids"].get<std::vector<int64_t>>()) << c["id"];
}

}  // namespace
}  // namespace stepmix::text
