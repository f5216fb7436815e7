// The `stepmix compare` report: prompts files, the JSON built from a
// synthetic run (known metric values), markdown and pictures.
#include "eval/report.hpp"
#include "pipeline/model_setup.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/error_of.hpp"
#include "common/golden.hpp"
#include "eval/report_png.hpp"
#include "eval/text_renderer.hpp"
#include "stepmix/tools.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A model directory: the tiny golden transformer plus a word-level tokenizer.
struct TempModel {
  fs::path root = fs::temp_directory_path() / ("stepmix_report_" + std::to_string(::getpid()));
  TempModel() {
    fs::remove_all(root);
    fs::create_directories(root / "text_tokenizer");
    fs::copy(test::golden_path("transformer"), root / "transformer", fs::copy_options::recursive);
    std::ofstream(root / "text_tokenizer" / "tokenizer.json") << R"({"version": "1.0",
      "added_tokens": [{"id": 0, "content": "[UNK]", "special": true},
                       {"id": 1, "content": "<|im_end|>", "special": true},
                       {"id": 2, "content": "<|vision_start|>", "special": true}],
      "normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "Whitespace"},
      "post_processor": null, "decoder": null,
      "model": {"type": "WordLevel", "unk_token": "[UNK]",
                "vocab": {"[UNK]": 0, "<|im_end|>": 1, "<|vision_start|>": 2, "a": 3, "coat": 4, "boot": 5}}})";
  }
  ~TempModel() { fs::remove_all(root); }
  std::string write_prompts(const std::string& text) const {
    const fs::path p = root / "prompts.txt";
    std::ofstream(p) << text;
    return p.string();
  }
};

TEST(ComparePrompts, TextIdsLabelsAndJsonLines) {
  TempModel model;
  const ModelDirectory dir = ModelDirectory::open(model.root.string());
  PromptEncoder prompt_encoder(dir);
  const PromptEncoderFn encoder = [&](const std::string& t) { return prompt_encoder.encode(t, {}); };
  const auto prompts = read_compare_prompts(model.write_prompts("# header\n"
                                                                "a coat\n"
                                                                "\n"
                                                                "a boot\tlabel:9\n"
                                                                "ids:7,8,1,2 label:3\n"
                                                                "{\"prompt\": \"coat\", \"label\": 4}\n"
                                                                "{\"ids\": [5, 1, 2]}\n"),
                                            encoder);
  ASSERT_EQ(prompts.size(), 5u);
  EXPECT_EQ(prompts[0].ids, (std::vector<int64_t>{3, 4, 1, 2}));
  EXPECT_FALSE(prompts[0].label);
  EXPECT_EQ(prompts[1].text, "a boot");
  EXPECT_EQ(prompts[1].ids, (std::vector<int64_t>{3, 5, 1, 2}));
  EXPECT_EQ(prompts[1].label, 9);
  EXPECT_EQ(prompts[2].ids, (std::vector<int64_t>{7, 8, 1, 2}));
  EXPECT_EQ(prompts[2].label, 3);
  EXPECT_EQ(prompts[3].ids, (std::vector<int64_t>{4, 1, 2}));
  EXPECT_EQ(prompts[3].label, 4);
  EXPECT_EQ(prompts[4].ids, (std::vector<int64_t>{5, 1, 2}));
}

TEST(ComparePrompts, ErrorsNameTheLine) {
  TempModel model;
  const ModelDirectory dir = ModelDirectory::open(model.root.string());
  PromptEncoder prompt_encoder(dir);
  const PromptEncoderFn encoder = [&](const std::string& t) { return prompt_encoder.encode(t, {}); };
  auto error_of = [&](const std::string& text) -> std::string {
    try {
      read_compare_prompts(model.write_prompts(text), encoder);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("# nothing\n\n").find("no prompts"), std::string::npos);
  EXPECT_NE(error_of("a coat\nids:1,x\n").find("prompts.txt:2"), std::string::npos);
  EXPECT_NE(error_of("{\"prompt\": \"a\", \"ids\": [1]}\n").find("exactly one"), std::string::npos);
  EXPECT_NE(error_of("{\"prompt\": \"a\", \"class\": 1}\n").find("unknown key \"class\""), std::string::npos);
  EXPECT_NE(error_of("{\"prompt\": \"a\", \"label\": -1}\n").find("label"), std::string::npos);
  EXPECT_NE(error_of("{broken\n").find("prompts.txt:1"), std::string::npos);
}

// Two prompts × two seeds of a 1×1×4×4 output; reference zeros.
//   w8a8:  every image off by 0.2 (model units) -> 0.1 on the [0, 1] scale
//   mixed: images off by 0.1, except image 3 identical to the reference
struct SyntheticRun {
  CompareSetup setup;
  CompareRun run;
  SyntheticRun() {
    setup.model = "m";
    setup.reference = "W8A16 on every step of --model";
    setup.steps = 2;
    setup.seeds = 2;
    setup.latent_shape = {1, 1, 4, 4};
    setup.scheduler = "UniPCMultistepScheduler";
    setup.prompts = {{"ids:1", {1}, 0}, {"ids:2", {2}, 1}};
    setup.classifier = "classifier";
    setup.classes = {"zero", "one"};
    run.modes = {{"reference", "", "W8A16x2", "forced+override", "W8A16"},
                 {"w8a8", "", "W8A8x2", "disabled", "W8A8"},
                 {"mixed", "", "W8A16x2", "checkpoint", "W8A16"}};
    const std::vector<float> zero(16, 0.0f);
    run.outputs = {{zero, zero, zero, zero},
                   {std::vector<float>(16, 0.2f), std::vector<float>(16, 0.2f), std::vector<float>(16, 0.2f),
                    std::vector<float>(16, 0.2f)},
                   {std::vector<float>(16, 0.1f), std::vector<float>(16, 0.1f), std::vector<float>(16, 0.1f), zero}};
    run.step_error = {{}, {{0.1, 0.2}, {0.1, 0.2}, {0.1, 0.2}, {0.1, 0.2}}, {{0, 0.1}, {0, 0.1}, {0, 0.1}, {0, 0}}};
    run.predicted = {{0, 0, 1, 1}, {0, 1, 1, 1}, {0, 0, 1, 0}};
  }
};

TEST(CompareReport, JsonHoldsTheKnownValues) {
  const SyntheticRun s;
  const json r = compare_report_json(s.setup, s.run);
  for (const char* key : {"format", "model", "reference", "steps", "guidance", "seeds", "images", "latent_shape",
                          "prompts", "metrics", "modes", "classifier", "per_image", "files"})
    EXPECT_TRUE(r.contains(key)) << key;
  EXPECT_EQ(r["images"], 4);
  ASSERT_EQ(r["modes"].size(), 3u);
  EXPECT_TRUE(r["modes"][0]["pooled"].is_null());  // the reference

  const json& w8a8 = r["modes"][1];
  EXPECT_NEAR(w8a8["pooled"]["psnr_db"].get<double>(), 20.0, 1e-4);  // MSE 0.01 (float 0.2)
  EXPECT_NEAR(w8a8["pooled"]["mae"].get<double>(), 0.1, 1e-6);
  EXPECT_TRUE(w8a8["paired_vs_w8a8"].is_null());
  EXPECT_EQ(w8a8["classifier"]["accuracy"], 0.75);
  EXPECT_EQ(w8a8["classifier"]["agreement_with_reference"], 0.75);
  EXPECT_EQ(w8a8["step_error"]["mean"], json({0.1, 0.2}));

  const json& mixed = r["modes"][2];
  // Per-image PSNR 26.02 dB (error 0.05) three times and the 100 dB cap once:
  // gains over W8A8 are 6.02, 6.02, 6.02, 80; the median is 6.02 dB.
  const json& paired = mixed["paired_vs_w8a8"];
  EXPECT_NEAR(paired["median_psnr_gain_db"].get<double>(), 20 * std::log10(2.0), 1e-4);
  EXPECT_LE(paired["ci95_db"][0].get<double>(), paired["median_psnr_gain_db"].get<double>());
  EXPECT_GE(paired["ci95_db"][1].get<double>(), paired["median_psnr_gain_db"].get<double>());
  EXPECT_EQ(paired["improved_fraction"], 1.0);
  EXPECT_EQ(paired["improved_fraction_mae"], 1.0);
  EXPECT_EQ(r["per_image"][3]["psnr_db"]["mixed"], kPsnrCapDb);
  EXPECT_EQ(mixed["classifier"]["accuracy"], 0.75);  // labels 0,0,1,1
  EXPECT_EQ(mixed["step_error"]["mean"][0], 0.0);
  EXPECT_NEAR(mixed["step_error"]["mean"][1].get<double>(), 0.075, 1e-12);
  EXPECT_NEAR(mixed["step_error"]["median"][1].get<double>(), 0.1, 1e-12);

  // Same input, same bytes (reports are compared across runs).
  EXPECT_EQ(compare_report_json(s.setup, s.run).dump(), r.dump());
}

TEST(CompareReport, IdenticalOutputsReportNullPsnr) {
  SyntheticRun s;
  s.run.outputs[2] = s.run.outputs[0];
  const json r = compare_report_json(s.setup, s.run);
  EXPECT_TRUE(r["modes"][2]["pooled"]["psnr_db"].is_null());
  EXPECT_EQ(r["modes"][2]["pooled"]["ssim"], 1.0);
  EXPECT_NE(compare_report_markdown(r).find("identical"), std::string::npos);
}

TEST(CompareReport, MarkdownHasTheTables) {
  const SyntheticRun s;
  const std::string md = compare_report_markdown(compare_report_json(s.setup, s.run));
  EXPECT_NE(md.find("| mode | trace | PSNR dB"), std::string::npos);
  EXPECT_NE(md.find("| mixed | W8A16x2 | "), std::string::npos);
  EXPECT_NE(md.find("6.02 dB ["), std::string::npos);
  EXPECT_NE(md.find("## Per-step latent error"), std::string::npos);
  EXPECT_NE(md.find("accuracy"), std::string::npos);
}

TEST(CompareReport, PicturesHaveTheDocumentedLayout) {
  const SyntheticRun s;
  const Image8 grid = compare_grid(s.setup, s.run);
  EXPECT_EQ(grid.channels, 3);
  // 4×4 outputs upscaled 8×; 2 prompts × (image row + difference row).
  EXPECT_GE(grid.height, 4 * 32);
  EXPECT_GE(grid.width, 3 * 32);
  EXPECT_EQ(grid.pixels.size(), std::size_t(grid.width) * grid.height * 3);
  const Image8 plot = step_error_plot(compare_report_json(s.setup, s.run));
  EXPECT_EQ(plot.channels, 3);
  EXPECT_GT(plot.width, 0);
  // Some pixels carry the W8A8 colour (its curve and legend box).
  const Rgb red = mode_colour("w8a8", 1);
  bool found = false;
  for (std::size_t i = 0; i + 2 < plot.pixels.size() && !found; i += 3)
    found = plot.pixels[i] == red[0] && plot.pixels[i + 1] == red[1] && plot.pixels[i + 2] == red[2];
  EXPECT_TRUE(found);
}

TEST(CompareReport, FontDrawsInk) {
  ASSERT_TRUE(TextRenderer::shared().available()) << "no font: scripts/setup.sh installs fonts-dejavu-core";
  Image8 img{40, 16, 3, std::vector<uint8_t>(40 * 16 * 3, 0)};
  EXPECT_EQ(draw_text(img, 0, 0, "W8", {255, 255, 255}), text_width("W8"));
  EXPECT_GT(text_width("W8"), 10);
  int ink = 0;
  for (uint8_t v : img.pixels) ink += v > 0;
  EXPECT_GT(ink, 0);
}

// The hand-drawn 3×5 font upper-cased everything and drew "8" with most of
// the pixels of "B"; a real font has lower case, anti-aliased edges, and
// glyphs that differ.
TEST(CompareReport, LabelsAreRenderedWithARealFont) {
  ASSERT_TRUE(TextRenderer::shared().available());
  auto render = [](const std::string& text) {
    Image8 img{24, 20, 3, std::vector<uint8_t>(24 * 20 * 3, 0)};
    draw_text(img, 2, 2, text, {255, 255, 255}, 16);
    return img.pixels;
  };
  EXPECT_NE(render("w"), render("W"));  // case is kept
  const auto eight = render("8"), bee = render("B");
  int differing = 0, inked = 0, partial = 0;
  for (std::size_t i = 0; i < eight.size(); i += 3) {
    differing += eight[i] != bee[i];
    inked += eight[i] > 0;
    partial += eight[i] > 0 && eight[i] < 255;
  }
  EXPECT_GT(differing, inked / 4);  // "8" and "B" share little ink
  EXPECT_GT(partial, 0);            // anti-aliased coverage, not on/off pixels
  EXPECT_GT(text_width("first-last:2,2"), text_width("w8a8"));
}

TEST(CompareReport, WithoutAFontPlotsHaveNoLabels) {
  const auto none = TextRenderer::from_file("/nonexistent/font.ttf");
  EXPECT_FALSE(none->available());
  Image8 img{20, 20, 3, std::vector<uint8_t>(20 * 20 * 3, 7)};
  EXPECT_EQ(none->draw(img, 0, 0, "W8A8", {255, 255, 255}, 13), 0);
  EXPECT_EQ(none->width("W8A8", 13), 0);
  EXPECT_EQ(img.pixels, std::vector<uint8_t>(20 * 20 * 3, 7));
  EXPECT_FALSE(TextRenderer::from_file("")->available());
}

TEST(CompareRequest, FieldsEachImageTakesFromElsewhereAreRefused) {
  // Checked before any model is opened: the folders need not exist.
  CompareOptions o;
  o.model_dir = "absent-model";
  o.prompts_file = "absent-prompts.txt";
  o.out_dir = "absent-report";
  o.seeds = 2;
  o.request.noise = std::vector<float>(16, 0.0f);
  std::string e = test::error_of([&] { compare(o, stdout); });
  EXPECT_NE(e.find("[compare] request.noise is not used here (each image's noise is drawn from its seed, 0 .. seeds - "
                   "1); leave it unset"),
            std::string::npos)
      << e;
  o.request = {};
  o.request.seed = 3;
  EXPECT_NE(test::error_of([&] { compare(o, stdout); }).find("request.seed is not used here"), std::string::npos);
  o.request = {};
  o.request.prompt = "a boot";
  EXPECT_NE(test::error_of([&] { compare(o, stdout); }).find("request.prompt is not used here"), std::string::npos);
  o.request = {};
  o.request.policy.mode = MixedPrecisionMode::None;
  EXPECT_NE(test::error_of([&] { compare(o, stdout); }).find("request.policy is not used here"), std::string::npos);
}

}  // namespace
}  // namespace stepmix
