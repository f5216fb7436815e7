// Image metrics, paired statistics and the shipped-classifier MLP of
// `stepmix compare`, against values worked out by hand.
#include "eval/metrics.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "io/safetensors.hpp"
#include "eval/classifier.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

namespace fs = std::filesystem;

PlanarImage filled(int planes, int h, int w, float value) {
  return {planes, h, w, std::vector<float>(std::size_t(planes) * h * w, value)};
}

TEST(Metrics, IdenticalImagesHaveInfinitePsnrUnitSsimZeroMae) {
  PlanarImage a{1, 8, 9, {}};
  for (int i = 0; i < 72; ++i) a.values.push_back(float((i * 37) % 17) / 16.0f);
  EXPECT_EQ(mean_squared_error(a, a), 0.0);
  EXPECT_EQ(mean_absolute_error(a, a), 0.0);
  EXPECT_TRUE(std::isinf(psnr_from_mse(mean_squared_error(a, a))));
  EXPECT_DOUBLE_EQ(ssim(a, a), 1.0);
}

TEST(Metrics, UniformOffsetGivesExactPsnrAndMae) {
  // |0.5 - 0.75| = 0.25 everywhere: MSE 1/16, PSNR 10·log10(16) dB, MAE 0.25.
  const PlanarImage a = filled(3, 4, 5, 0.5f), b = filled(3, 4, 5, 0.75f);
  EXPECT_DOUBLE_EQ(mean_squared_error(a, b), 0.0625);
  EXPECT_DOUBLE_EQ(mean_absolute_error(a, b), 0.25);
  EXPECT_NEAR(psnr_from_mse(0.0625), 12.041199826559248, 1e-12);
  EXPECT_NEAR(psnr_from_mse(0.01), 20.0, 1e-12);
}

TEST(Metrics, SsimOfFlatImagesIsTheLuminanceTerm) {
  // Zero variances: SSIM = (2·μx·μy + C1) / (μx² + μy² + C1), C1 = 0.01².
  const PlanarImage a = filled(1, 10, 12, 0.5f), b = filled(1, 10, 12, 0.625f);
  const double c1 = 1e-4;
  EXPECT_NEAR(ssim(a, b), (2 * 0.5 * 0.625 + c1) / (0.25 + 0.390625 + c1), 1e-12);
}

TEST(Metrics, SsimOfOneThreeByThreeWindowMatchesHandComputation) {
  // 3×3 images: the window shrinks to 3 (one position). x = k/8; y equals x
  // but for the centre (0.9) and the top-right pixel (0.1). Computed by hand
  // (means, sample variances and covariance over 9 pixels):
  // ((2·μx·μy + C1)(2·σxy + C2)) / ((μx² + μy² + C1)(σx² + σy² + C2)).
  PlanarImage x{1, 3, 3, {}}, y;
  for (int k = 0; k < 9; ++k) x.values.push_back(float(k) / 8.0f);
  y = x;
  y.values[4] = 0.9f;
  y.values[2] = 0.1f;
  EXPECT_NEAR(ssim(x, y), 0.9163466057366141, 1e-6);
  EXPECT_NEAR(ssim(x, y), ssim(y, x), 1e-15);  // symmetric
}

TEST(Metrics, SsimAveragesPlanesAndRejectsTinyImages) {
  PlanarImage a = filled(2, 7, 7, 0.5f), b = a;
  for (int i = 49; i < 98; ++i) b.values[std::size_t(i)] = 0.625f;  // second plane only
  const double flat = (2 * 0.5 * 0.625 + 1e-4) / (0.25 + 0.390625 + 1e-4);
  EXPECT_NEAR(ssim(a, b), (1.0 + flat) / 2, 1e-12);
  EXPECT_THROW(ssim(filled(1, 2, 9, 0), filled(1, 2, 9, 0)), Error);
  EXPECT_THROW(mean_squared_error(filled(1, 3, 3, 0), filled(1, 3, 4, 0)), Error);
}

TEST(Metrics, OutputsAreClampedAndMappedToUnitRange) {
  const PlanarImage img = image_from_output({-1.0f, 0.0f, 1.0f, 3.0f, -7.0f, 0.5f}, 1, 2, 1, 3);
  EXPECT_EQ(img.planes, 2);
  EXPECT_EQ(img.values, (std::vector<float>{0.0f, 0.5f, 1.0f, 1.0f, 0.0f, 0.75f}));
  EXPECT_THROW(image_from_output({0.0f}, 1, 1, 2, 2), Error);
}

TEST(Metrics, RelativeL2Error) {
  EXPECT_DOUBLE_EQ(relative_l2_error({3, 9}, {3, 4}), 1.0);  // ||(0,5)|| / ||(3,4)||
  EXPECT_EQ(relative_l2_error({3, 4}, {3, 4}), 0.0);
  EXPECT_EQ(relative_l2_error({0, 0}, {0, 0}), 0.0);
  EXPECT_TRUE(std::isinf(relative_l2_error({1, 0}, {0, 0})));
  EXPECT_THROW(relative_l2_error({1}, {1, 2}), Error);
}

TEST(Metrics, Median) {
  EXPECT_EQ(median({5, 1, 3}), 3);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_TRUE(std::isnan(median({})));
}

TEST(Metrics, BootstrapIntervalContainsTheMedianAndIsReproducible) {
  // A skewed sample (gains of a few dB, a few large outliers).
  std::vector<double> gains;
  for (int i = 0; i < 200; ++i) gains.push_back(std::fmod(i * 0.618, 3.0) + (i % 37 == 0 ? 25.0 : 0.0));
  const BootstrapInterval ci = bootstrap_median_interval(gains);
  EXPECT_DOUBLE_EQ(ci.estimate, median(gains));
  EXPECT_LE(ci.low, ci.estimate);
  EXPECT_GE(ci.high, ci.estimate);
  EXPECT_LT(ci.high - ci.low, 1.0);  // the median of 200 values is well determined
  const BootstrapInterval again = bootstrap_median_interval(gains);
  EXPECT_EQ(again.low, ci.low);
  EXPECT_EQ(again.high, ci.high);
  // A wider level gives an interval at least as wide.
  const BootstrapInterval wide = bootstrap_median_interval(gains, 0.99);
  EXPECT_LE(wide.low, ci.low);
  EXPECT_GE(wide.high, ci.high);
  // Constant values: a degenerate interval.
  const BootstrapInterval flat = bootstrap_median_interval(std::vector<double>(10, 1.5));
  EXPECT_EQ(flat.low, 1.5);
  EXPECT_EQ(flat.high, 1.5);
  EXPECT_THROW(bootstrap_median_interval({}), Error);
  EXPECT_THROW(bootstrap_median_interval({1.0}, 1.5), Error);
}

// linear(2->3) ReLU linear(3->2), small enough to evaluate by hand.
std::vector<MlpLayer> hand_made_layers() {
  MlpLayer l1{MlpLayer::Kind::Linear, 2, 3, {1, -1, 2, 0.5f, -1, 1}, {0, -1, 0.5f}};
  MlpLayer relu{MlpLayer::Kind::Relu, 0, 0, {}, {}};
  MlpLayer l2{MlpLayer::Kind::Linear, 3, 2, {1, 0, 1, 0, 1, -1}, {}};
  return {l1, relu, l2};
}

TEST(Classifier, ReproducesAHandMadeMlp) {
  const MlpClassifier mlp(hand_made_layers(), {2}, {"zero", "one"});
  // x = (0.5, -0.5): h = relu(1, -0.25, -0.5) = (1, 0, 0); logits (1, 0).
  EXPECT_EQ(mlp.logits({0.5f, -0.5f}), (std::vector<float>{1.0f, 0.0f}));
  EXPECT_EQ(mlp.predict({0.5f, -0.5f}), 0);
  // x = (1, 1): h = relu(0, 1.5, 0.5); logits (0.5, 1).
  EXPECT_EQ(mlp.logits({1.0f, 1.0f}), (std::vector<float>{0.5f, 1.0f}));
  EXPECT_EQ(mlp.predict({1.0f, 1.0f}), 1);
  EXPECT_THROW(mlp.logits({1.0f}), Error);
}

TEST(Classifier, RejectsInconsistentLayers) {
  auto layers = hand_made_layers();
  layers[2].in = 4;
  EXPECT_THROW(MlpClassifier(layers, {2}, {}), Error);
  EXPECT_THROW(MlpClassifier(hand_made_layers(), {3}, {}), Error);               // input shape
  EXPECT_THROW(MlpClassifier(hand_made_layers(), {2}, {"a", "b", "c"}), Error);  // class count
}

TEST(Classifier, LoadsTheShippedLayoutAndMapsTheInputRange) {
  const fs::path dir = fs::temp_directory_path() / ("stepmix_classifier_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto layers = hand_made_layers();
  write_safetensors(
      (dir / "classifier.safetensors").string(),
      {make_tensor_f32("fc1.weight", {3, 2}, layers[0].weight), make_tensor_f32("fc1.bias", {3}, layers[0].bias),
       make_tensor_f32("fc2.weight", {2, 3}, layers[2].weight)});
  auto write_desc = [&](const std::string& range) {
    std::ofstream(dir / "classifier.json") << R"({"input": {"shape": [1, 2], "range": )" << range << R"(},
      "layers": [{"type": "linear", "weight": "fc1.weight", "bias": "fc1.bias", "in": 2, "out": 3},
                 {"type": "relu"}, {"type": "linear", "weight": "fc2.weight", "in": 3, "out": 2}],
      "classes": ["zero", "one"]})";
  };
  write_desc("[-1, 1]");
  const MlpClassifier same = MlpClassifier::load(dir.string());
  EXPECT_EQ(same.input_shape(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(same.classes(), (std::vector<std::string>{"zero", "one"}));
  EXPECT_EQ(same.logits({1.0f, 1.0f}), (std::vector<float>{0.5f, 1.0f}));
  // Range [0, 2]: model pixels (0, 0) become (1, 1).
  write_desc("[0, 2]");
  EXPECT_EQ(MlpClassifier::load(dir.string()).logits({0.0f, 0.0f}), (std::vector<float>{0.5f, 1.0f}));
  // A layer whose declared size disagrees with its tensor is an error naming it.
  std::ofstream(dir / "classifier.json")
      << R"({"layers": [{"type": "linear", "weight": "fc1.weight", "in": 3, "out": 3}]})";
  try {
    MlpClassifier::load(dir.string());
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fc1.weight"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "classifier.json") << R"({"layers": [{"type": "softmax"}]})";
  EXPECT_THROW(MlpClassifier::load(dir.string()), Error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stepmix
