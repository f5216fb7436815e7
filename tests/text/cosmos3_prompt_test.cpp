// The Cosmos3 prompt builder: number formatting, the sentence rules,
// request parsing, chat-template fingerprints and how a folder is read.
#include <gtest/gtest.h>

#include <fstream>

#include "common/error_of.hpp"
#include "common/golden.hpp"
#include "common/temp_dir.hpp"
#include "text/chat_template.hpp"
#include "text/cosmos3_prompt.hpp"
#include "text/prompt_model.hpp"
#include "tiny_bpe.hpp"

namespace stepmix::text {
namespace {

using json = nlohmann::json;
using test::error_of;

TEST(Cosmos3Prompt, NumbersAreFormattedFromTheExactBinaryValueHalfToEven) {
  EXPECT_EQ(format_fixed(189.0 / 24.0, 1), "7.9");  // 7.875 is exact in binary and not a tie
  EXPECT_EQ(format_fixed(49.0 / 4.0, 1), "12.2");   // 12.25: a tie, to even
  EXPECT_EQ(format_fixed(0.75, 1), "0.8");
  EXPECT_EQ(format_fixed(0.25, 1), "0.2");
  EXPECT_EQ(format_fixed(49.0 / 20.0, 1), "2.5");   // 2.45 is stored slightly above
  EXPECT_EQ(format_fixed(5.0 / 16.0, 1), "0.3");
  EXPECT_EQ(format_fixed(12.5, 0), "12");
  EXPECT_EQ(format_fixed(13.5, 0), "14");
  EXPECT_EQ(format_fixed(2.5, 0), "2");
  EXPECT_EQ(format_fixed(23.976, 0), "24");
  EXPECT_EQ(format_fixed(24.0, 0), "24");
}

TEST(Cosmos3Prompt, SentencesAreAppendedAfterStrippingTrailingDots) {
  EXPECT_EQ(append_sentence("A robot", "S."), "A robot. S.");
  EXPECT_EQ(append_sentence("A robot...", "S."), "A robot. S.");
  EXPECT_EQ(append_sentence("...", "S."), "S.");
  EXPECT_EQ(append_sentence("", "S."), "S.");
  EXPECT_EQ(append_sentence("A cat. ", "S."), "A cat. . S.");  // a dot before a space is not trailing
  EXPECT_EQ(append_sentence("\xE3\x80\x82", "S."), "\xE3\x80\x82. S.");  // only ASCII dots
}

TEST(Cosmos3Prompt, VideoAndImageTexts) {
  Cosmos3PromptRequest r;
  r.prompt = "A robot";
  Cosmos3Texts t = cosmos3_texts(r, true);
  EXPECT_EQ(t.positive, "A robot. The video is 7.9 seconds long and is of 24 FPS. This video is of 720x1280 resolution.");
  EXPECT_EQ(t.negative, "The video is not 7.9 seconds long and is not of 24 FPS. This video is not of 720x1280 resolution.");
  EXPECT_EQ(t.system, "You are a helpful assistant who will generate videos from a give prompt.");

  r.num_frames = 1;  // an image: no duration sentence, 1024x1024 by default
  t = cosmos3_texts(r, false);
  EXPECT_EQ(t.positive, "A robot. This image is of 1024x1024 resolution.");
  EXPECT_EQ(t.negative, "This image is not of 1024x1024 resolution.");
  EXPECT_FALSE(t.system);

  r.num_frames = 61;
  r.fps = 12.5;
  r.height = 480;
  r.width = 832;
  r.negative_prompt = "blurry.";
  r.resolution_sentence = false;
  t = cosmos3_texts(r, true);
  EXPECT_EQ(t.positive, "A robot. The video is 4.9 seconds long and is of 12 FPS.");
  EXPECT_EQ(t.negative, "blurry. The video is not 4.9 seconds long and is not of 12 FPS.");
  r.duration_sentence = false;
  r.prompt = "As is.";
  EXPECT_EQ(cosmos3_texts(r, true).positive, "As is.");
}

TEST(Cosmos3Prompt, InvalidRequestsAreRefused) {
  Cosmos3PromptRequest r;
  r.height = 0;
  EXPECT_NE(error_of([&] { cosmos3_texts(r, true); }).find("height: expected a positive integer, got 0"), std::string::npos);
  r = {};
  r.num_frames = 0;
  EXPECT_NE(error_of([&] { cosmos3_texts(r, true); }).find("num_frames"), std::string::npos);
  r = {};
  r.fps = 0;
  EXPECT_NE(error_of([&] { cosmos3_texts(r, true); }).find("fps: expected a number in [0.01, 1000], got 0"),
            std::string::npos);
  r.fps = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(error_of([&] { cosmos3_texts(r, true); }).find("fps"), std::string::npos);
  // A frame rate so small that the duration overflows.
  r.fps = 1e-300;
  EXPECT_NE(error_of([&] { cosmos3_texts(r, true); }).find("got 1e-300"), std::string::npos);
}

TEST(Cosmos3Prompt, RequestsFromJson) {
  const Cosmos3PromptRequest r = cosmos3_request_from_json(
      json::parse(R"({"id": "x", "note": "n", "mode": "video", "prompt": "p", "negative_prompt": null, "height": 704,
                      "width": 1280, "num_frames": 151, "fps": 30, "use_system_prompt": false,
                      "resolution_sentence": true, "duration_sentence": false})"),
      "line 1");
  EXPECT_EQ(r.prompt, "p");
  EXPECT_FALSE(r.negative_prompt);
  EXPECT_EQ(r.height, 704);
  EXPECT_EQ(r.num_frames, 151);
  EXPECT_EQ(r.fps, 30.0);
  EXPECT_EQ(r.use_system_prompt, false);
  EXPECT_FALSE(r.duration_sentence);
  const Cosmos3PromptRequest d = cosmos3_request_from_json(json::parse(R"({"prompt": "p", "num_frames": 1})"), "l");
  EXPECT_EQ(request_height(d), 1024);
  EXPECT_FALSE(d.use_system_prompt);  // the model decides

  auto error = [](const char* line) { return error_of([&] { cosmos3_request_from_json(json::parse(line), "in.jsonl: line 4"); }); };
  EXPECT_NE(error(R"({"prompt": "p", "promt": "q"})").find("in.jsonl: line 4: unknown field \"promt\""), std::string::npos);
  EXPECT_NE(error(R"({"negative_prompt": ""})").find("prompt: required"), std::string::npos);
  EXPECT_NE(error(R"({"prompt": 3})").find("prompt: expected a string, got 3"), std::string::npos);
  EXPECT_NE(error(R"({"prompt": "p", "height": 720.5})").find("height: expected an integer"), std::string::npos);
  EXPECT_NE(error(R"({"prompt": "p", "fps": "24"})").find("fps: expected a number"), std::string::npos);
  EXPECT_NE(error(R"({"prompt": "p", "duration_sentence": 1})").find("duration_sentence: expected true or false"),
            std::string::npos);
  EXPECT_NE(error(R"({"prompt": "p", "mode": "image"})").find("mode: \"image\" does not match num_frames 189"),
            std::string::npos);
}

TEST(ChatTemplate, KnownTemplatesAreRecognisedByFingerprint) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::ifstream vl(test::data_path("golden/qwen3-tokenizer/text_tokenizer/chat_template.jinja"), std::ios::binary);
  std::ifstream qwen3(test::data_path("chat-templates/qwen3.jinja"), std::ios::binary);
  const std::string vl_text((std::istreambuf_iterator<char>(vl)), {}), qwen3_text((std::istreambuf_iterator<char>(qwen3)), {});
  EXPECT_EQ(known_chat_template(sha256_hex(vl_text)), "Qwen3-VL-Instruct");
  EXPECT_EQ(known_chat_template(sha256_hex(qwen3_text)), "Qwen3");
  EXPECT_FALSE(known_chat_template(sha256_hex(vl_text + "\n")));
  EXPECT_EQ(render_chatml(std::nullopt, "hi"), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_chatml("S", "hi"), "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

// A Cosmos3-like model folder around a tiny byte-level tokenizer (no merges:
// a byte's id is its value) with the three control tokens.
class PromptFolder : public test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    tokenizer_ = test::tiny_bpe({}, json::array({test::added_token(300, "<|im_start|>"), test::added_token(301, "<|im_end|>"),
                                                  test::added_token(302, "<|vision_start|>")}))
                     .dump();
    std::ifstream vl(test::data_path("golden/qwen3-tokenizer/text_tokenizer/chat_template.jinja"), std::ios::binary);
    template_.assign(std::istreambuf_iterator<char>(vl), {});
  }
  void write_model(const std::string& sub, bool with_template = true) {
    write_text(sub + "/tokenizer.json", tokenizer_);
    write_text(sub + "/tokenizer_config.json", R"({"eos_token": "<|im_end|>"})");
    if (with_template) write_text(sub + "/chat_template.jinja", template_);
  }
  std::string tokenizer_, template_;
};

std::vector<int64_t> bytes_then(const std::string& s, std::vector<int64_t> tail) {
  std::vector<int64_t> ids(s.begin(), s.end());
  ids.insert(ids.end(), tail.begin(), tail.end());
  return ids;
}

TEST_F(PromptFolder, ModelFoldersTokenizerFoldersAndFiles) {
  write_model("model/text_tokenizer");
  write_text("model/model_index.json", R"({"default_use_system_prompt": false})");
  const PromptModel m = PromptModel::open((dir_ / "model").string());
  EXPECT_TRUE(m.is_cosmos3_chat());
  EXPECT_FALSE(m.default_use_system_prompt());
  EXPECT_EQ(m.folder().dir, (dir_ / "model" / "text_tokenizer").string());
  Cosmos3PromptRequest r;
  r.prompt = "Hi";
  r.num_frames = 1;
  r.height = r.width = 16;
  Cosmos3Prompt p = m.build(r);
  EXPECT_EQ(p.positive_rendered, "<|im_start|>user\nHi. This image is of 16x16 resolution.<|im_end|>\n<|im_start|>assistant\n");
  std::vector<int64_t> expected = {300};
  for (int64_t id : bytes_then("user\nHi. This image is of 16x16 resolution.", {301})) expected.push_back(id);
  for (int64_t id : bytes_then("\n", {300})) expected.push_back(id);
  for (int64_t id : bytes_then("assistant\n", {301, 302})) expected.push_back(id);
  EXPECT_EQ(p.positive_ids, expected);
  r.use_system_prompt = true;  // the request overrides model_index.json
  EXPECT_EQ(m.build(r).system_prompt, "You are a helpful assistant who will generate images from a give prompt.");

  write_model("fallback/tokenizer");  // tokenizer/ when there is no text_tokenizer/
  EXPECT_TRUE(PromptModel::open((dir_ / "fallback").string()).default_use_system_prompt());
  EXPECT_EQ(PromptModel::open((dir_ / "fallback" / "tokenizer").string()).folder().dir, (dir_ / "fallback" / "tokenizer").string());
  EXPECT_TRUE(PromptModel::open((dir_ / "fallback" / "tokenizer" / "tokenizer.json").string()).is_cosmos3_chat());
  EXPECT_NE(error_of([&] { PromptModel::open((dir_ / "nothing").string()); }).find("no such file or directory"),
            std::string::npos);
  std::filesystem::create_directories(dir_ / "empty");
  EXPECT_NE(error_of([&] { PromptModel::open((dir_ / "empty").string()); }).find("no text_tokenizer/tokenizer.json"),
            std::string::npos);
  write_text("model/model_index.json", R"({"default_use_system_prompt": "no"})");
  EXPECT_NE(error_of([&] { PromptModel::open((dir_ / "model").string()); }).find("default_use_system_prompt: expected true or false"),
            std::string::npos);
}

TEST_F(PromptFolder, WhatAChatModelNeedsIsChecked) {
  write_model("unknown");
  write_text("unknown/chat_template.jinja", template_ + " ");
  const std::string unknown = error_of([&] { PromptModel::open((dir_ / "unknown").string()); });
  EXPECT_NE(unknown.find("unknown/chat_template.jinja: unknown chat template (sha256 "), std::string::npos) << unknown;

  write_model("config", false);  // the template inside tokenizer_config.json
  write_text("config/tokenizer_config.json", json({{"eos_token", "<|im_end|>"}, {"chat_template", template_}}).dump());
  EXPECT_EQ(PromptModel::open((dir_ / "config").string()).chat_template()->name, "Qwen3-VL-Instruct");
  write_text("config/tokenizer_config.json", json({{"eos_token", {{"content", "<|im_end|>"}}}, {"chat_template", json::array()}}).dump());
  EXPECT_NE(error_of([&] { PromptModel::open((dir_ / "config").string()); }).find("chat_template: expected a string"),
            std::string::npos);

  write_model("bare", false);
  EXPECT_NE(error_of([&] { PromptModel::open((dir_ / "bare").string()); }).find("BPE tokenizer without a chat template"),
            std::string::npos);
  write_model("no_eos");
  write_text("no_eos/tokenizer_config.json", "{}");
  EXPECT_NE(error_of([&] { PromptModel::open((dir_ / "no_eos").string()); }).find("eos_token: required"), std::string::npos);
  write_text("no_eos/tokenizer_config.json", R"({"eos_token": "</s>"})");
  EXPECT_NE(error_of([&] { PromptModel::open((dir_ / "no_eos").string()); }).find("eos_token: \"</s>\" is not a token"),
            std::string::npos);
}

TEST_F(PromptFolder, MoreThan4096IdsIsAnErrorGivingTheCount) {
  write_model("m");
  const PromptModel m = PromptModel::open((dir_ / "m").string());
  Cosmos3PromptRequest r;
  r.num_frames = 1;
  r.height = r.width = 16;
  r.use_system_prompt = false;
  r.resolution_sentence = false;
  // 300 "user\n" PROMPT 301 "\n" 300 "assistant\n", eos, vision start: the prompt + 21 ids
  r.prompt = std::string(4096 - 21, 'x');
  EXPECT_EQ(m.build(r).positive_ids.size(), 4096u);
  r.prompt += "x";
  EXPECT_NE(error_of([&] { m.build(r); }).find("positive prompt: 4097 token ids, more than the 4096"), std::string::npos);
  r.prompt = "ok";
  r.negative_prompt = std::string(5000, 'y');
  EXPECT_NE(error_of([&] { m.build(r); }).find("negative prompt: 5021 token ids"), std::string::npos);
  EXPECT_NE(error_of([&] { m.understanding_prefix("x"); }).find("Cosmos3 prompt builder"), std::string::npos);
}

}  // namespace
}  // namespace stepmix::text
