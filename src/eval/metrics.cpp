#include "eval/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "stepmix/error.hpp"

namespace stepmix {
namespace {

void check_same_shape(const PlanarImage& a, const PlanarImage& b) {
  if (a.planes != b.planes || a.height != b.height || a.width != b.width || a.values.size() != a.size() ||
      b.values.size() != b.size())
    throw Error("metrics", "images differ in shape: " + std::to_string(a.planes) + "x" + std::to_string(a.height) +
                               "x" + std::to_string(a.width) + " vs " + std::to_string(b.planes) + "x" +
                               std::to_string(b.height) + "x" + std::to_string(b.width));
  if (a.size() == 0) throw Error("metrics", "empty image");
}

// Type-7 quantile (linear interpolation) of sorted values.
double sorted_quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * double(sorted.size() - 1);
  const std::size_t lo = std::size_t(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - double(lo)) * (sorted[hi] - sorted[lo]);
}

}  // namespace

PlanarImage image_from_output(const std::vector<float>& output, int64_t channels, int64_t frames, int64_t height,
                              int64_t width) {
  PlanarImage img;
  img.planes = int(channels * frames);
  img.height = int(height);
  img.width = int(width);
  if (output.size() != img.size())
    throw Error("metrics",
                "output has " + std::to_string(output.size()) + " values, expected " + std::to_string(img.size()));
  img.values.resize(output.size());
  for (std::size_t i = 0; i < output.size(); ++i) img.values[i] = std::clamp(output[i] * 0.5f + 0.5f, 0.0f, 1.0f);
  return img;
}

double mean_squared_error(const PlanarImage& a, const PlanarImage& b) {
  check_same_shape(a, b);
  double sum = 0;
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    const double d = double(a.values[i]) - double(b.values[i]);
    sum += d * d;
  }
  return sum / double(a.values.size());
}

double mean_absolute_error(const PlanarImage& a, const PlanarImage& b) {
  check_same_shape(a, b);
  double sum = 0;
  for (std::size_t i = 0; i < a.values.size(); ++i) sum += std::fabs(double(a.values[i]) - double(b.values[i]));
  return sum / double(a.values.size());
}

double psnr_from_mse(double mse) {
  if (mse <= 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(1.0 / mse);
}

double ssim(const PlanarImage& a, const PlanarImage& b, const SsimOptions& options) {
  check_same_shape(a, b);
  int win = std::min({options.window, a.height, a.width});
  if (win % 2 == 0) --win;
  if (win < 3)
    throw Error("metrics", "SSIM needs images of at least 3x3 pixels, got " + std::to_string(a.height) + "x" +
                               std::to_string(a.width));
  const double c1 = options.k1 * options.k1, c2 = options.k2 * options.k2;  // data range 1
  const double n = double(win) * win;
  double total = 0;
  for (int p = 0; p < a.planes; ++p) {
    const float* x = a.values.data() + std::size_t(p) * a.height * a.width;
    const float* y = b.values.data() + std::size_t(p) * a.height * a.width;
    double plane_sum = 0;
    int windows = 0;
    for (int top = 0; top + win <= a.height; ++top) {
      for (int left = 0; left + win <= a.width; ++left) {
        double mx = 0, my = 0;
        for (int r = top; r < top + win; ++r)
          for (int c = left; c < left + win; ++c) {
            mx += x[r * a.width + c];
            my += y[r * a.width + c];
          }
        mx /= n;
        my /= n;
        // Two-pass (co)variances: no cancellation on flat regions.
        double vx = 0, vy = 0, cxy = 0;
        for (int r = top; r < top + win; ++r)
          for (int c = left; c < left + win; ++c) {
            const double dx = x[r * a.width + c] - mx, dy = y[r * a.width + c] - my;
            vx += dx * dx;
            vy += dy * dy;
            cxy += dx * dy;
          }
        vx /= n - 1;
        vy /= n - 1;
        cxy /= n - 1;
        plane_sum += ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2));
        ++windows;
      }
    }
    total += plane_sum / windows;
  }
  return total / a.planes;
}

double relative_l2_error(const std::vector<float>& a, const std::vector<float>& reference) {
  if (a.size() != reference.size())
    throw Error("metrics", "relative error of vectors of " + std::to_string(a.size()) + " and " +
                               std::to_string(reference.size()) + " values");
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(reference[i]);
    diff += d * d;
    ref += double(reference[i]) * double(reference[i]);
  }
  if (diff == 0) return 0;
  if (ref == 0) return std::numeric_limits<double>::infinity();
  return std::sqrt(diff / ref);
}

double median(std::vector<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

BootstrapInterval bootstrap_median_interval(const std::vector<double>& values, double level, int resamples,
                                            uint64_t seed) {
  if (values.empty()) throw Error("metrics", "bootstrap of an empty sample");
  if (!(level > 0 && level < 1) || resamples < 1)
    throw Error("metrics", "bootstrap needs 0 < level < 1 and at least one resample");
  BootstrapInterval out;
  out.estimate = median(values);
  std::mt19937_64 rng(seed);
  const std::size_t n = values.size();
  std::vector<double> draw(n), medians;
  medians.reserve(std::size_t(resamples));
  for (int r = 0; r < resamples; ++r) {
    // Index from the top 53 bits: a fixed formula, unlike the library's
    // distributions, whose algorithms the standard leaves open.
    for (std::size_t k = 0; k < n; ++k)
      draw[k] = values[std::min(n - 1, std::size_t(double(rng() >> 11) * 0x1.0p-53 * double(n)))];
    medians.push_back(median(draw));
  }
  std::sort(medians.begin(), medians.end());
  out.low = sorted_quantile(medians, (1 - level) / 2);
  out.high = sorted_quantile(medians, (1 + level) / 2);
  return out;
}

}  // namespace stepmix
