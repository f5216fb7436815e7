// The 28 governed linears of cosmos3-tiny against the W8A8 goldens
// (golden README §4 and §9): codes computed from `w8a8.linear_in.<name>` must
// equal `w8a8.act_codes.<name>` up to rare one-step differences; with the
// stored codes forced, outputs must match `w8a8.linear_out.<name>` within
// 2e-6 · max|golden|. W8A16 is checked against its own definition.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/golden.hpp"
#include "core/numerics.hpp"
#include "io/safetensors.hpp"
#include "quant/linear.hpp"

namespace stepmix {
namespace {

// Position of a code on the number line (±0 share 0), so that neighbours differ by 1.
int e4m3_ordinal(uint8_t code) { return (code & 0x80) ? -int(code & 0x7F) : int(code); }

LinearWeights load_weights(const SafetensorsFile& file, const std::string& name) {
  LinearWeights w;
  w.name = name;
  w.weight = file.get(name + ".weight");
  w.weight_scale = file.get(name + ".weight_scale").as<float>()[0];
  w.input_scale = file.get(name + ".input_scale").as<float>()[0];
  return w;
}

struct GoldenFiles {
  std::shared_ptr<const SafetensorsFile> forward =
      SafetensorsFile::open(test::golden_path("forward/image.safetensors"));
  std::shared_ptr<const SafetensorsFile> weights =
      SafetensorsFile::open(test::golden_path("transformer-fp8/diffusion_pytorch_model.safetensors"));

  std::vector<std::string> governed_linears() const {
    const std::string prefix = "w8a8.linear_in.";
    std::vector<std::string> names;
    for (const std::string& n : forward->names())
      if (n.rfind(prefix, 0) == 0) names.push_back(n.substr(prefix.size()));
    return names;
  }
};

TEST(LinearGolden, W8A8CodesAndForcedCodeOutputs) {
  GoldenFiles files;
  const auto names = files.governed_linears();
  ASSERT_EQ(names.size(), 28u);
  int64_t total_codes = 0, mismatches = 0;
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const TensorView& x = files.forward->get("w8a8.linear_in." + name);
    const TensorView& golden_codes = files.forward->get("w8a8.act_codes." + name);
    const TensorView& golden_out = files.forward->get("w8a8.linear_out." + name);
    for (WeightCache cache : {WeightCache::None, WeightCache::All}) {
      Linear linear(load_weights(*files.weights, name), cache);
      const int64_t M = x.shape[0], K = x.shape[1], N = linear.out_features();
      ASSERT_EQ(K, linear.in_features());
      ASSERT_EQ(golden_codes.numel(), M * K);
      ASSERT_EQ(golden_out.numel(), M * N);
      int64_t layer_mismatches = 0;
      linear.set_code_hook([&](const std::string& hook_name, uint8_t* codes, int64_t rows, int64_t cols) {
        EXPECT_EQ(hook_name, name);
        const auto* expected = golden_codes.as<uint8_t>();
        for (int64_t i = 0; i < rows * cols; ++i) {
          if (codes[i] == expected[i]) continue;
          ++layer_mismatches;
          EXPECT_EQ(std::abs(e4m3_ordinal(codes[i]) - e4m3_ordinal(expected[i])), 1)
              << "code " << i << ": got 0x" << std::hex << int(codes[i]) << " expected 0x" << int(expected[i]);
          codes[i] = expected[i];  // forced-code mode
        }
      });
      std::vector<float> y(static_cast<size_t>(M * N));
      linear.forward(x.as<float>(), M, y.data(), Precision::W8A8);
      const float* g = golden_out.as<float>();
      float max_abs_golden = 0.0f, max_abs_diff = 0.0f;
      for (int64_t i = 0; i < M * N; ++i) {
        max_abs_golden = std::max(max_abs_golden, std::fabs(g[i]));
        max_abs_diff = std::max(max_abs_diff, std::fabs(y[i] - g[i]));
      }
      EXPECT_LE(max_abs_diff, 2e-6f * max_abs_golden) << "max|y-g| " << max_abs_diff << " max|g| " << max_abs_golden;
      if (cache == WeightCache::None) {
        mismatches += layer_mismatches;
        total_codes += M * K;
      }
    }
  }
  EXPECT_LE(double(mismatches), 1e-3 * double(total_codes)) << mismatches << " of " << total_codes;
}

// W8A16 on the same inputs: W_deq = float32(decode · s_w), float32 sums.
TEST(LinearGolden, W8A16MatchesDefinitionOnGoldenInputs) {
  GoldenFiles files;
  for (const std::string& name : files.governed_linears()) {
    SCOPED_TRACE(name);
    const TensorView& x = files.forward->get("w8a8.linear_in." + name);
    LinearWeights w = load_weights(*files.weights, name);
    Linear linear(w);
    const int64_t M = x.shape[0], K = x.shape[1], N = linear.out_features();
    std::vector<float> y(static_cast<size_t>(M * N));
    linear.forward(x.as<float>(), M, y.data(), Precision::W8A16);
    const float* xs = x.as<float>();
    const auto* codes = w.weight.as<uint8_t>();
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double exact = 0, sum_abs = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = double(xs[m * K + k]) * double(e4m3_to_float(codes[n * K + k]) * *w.weight_scale);
          exact += p;
          sum_abs += std::fabs(p);
        }
        ASSERT_NEAR(y[m * N + n], exact, double(K + 2) * 0x1p-23 * sum_abs + 1e-30) << m << "," << n;
      }
  }
}

}  // namespace
}  // namespace stepmix
