// Image-quality and paired statistics for `stepmix compare`.
//
// Images are planar float arrays (planes = channels × frames, each H×W) with
// values in [0, 1] (the [-1, 1] model output mapped by x/2 + 0.5). Every
// metric uses data range 1 and double accumulation.
//
//   PSNR  10·log10(1 / MSE); +inf for identical images.
//   SSIM  Wang et al. 2004 with a uniform 7×7 window (scikit-image's
//         structural_similarity default: K1 0.01, K2 0.03, sample
//         covariance N/(N−1)), averaged over every fully inside window
//         position and then over planes. Images smaller than 7 pixels on a
//         side use the largest odd window that fits (at least 3).
//   MAE   mean |a − b|.
#pragma once

#include <cstdint>
#include <vector>

namespace stepmix {

struct PlanarImage {
  int planes = 1;
  int height = 0;
  int width = 0;
  std::vector<float> values;  // [planes][height][width]

  std::size_t size() const { return std::size_t(planes) * height * width; }
};

// Clamps a model output in [-1, 1] (pixels or a latent shown as one) to
// [0, 1]; the latent layout [C, T, H, W] becomes C·T planes.
PlanarImage image_from_output(const std::vector<float>& output, int64_t channels, int64_t frames, int64_t height,
                              int64_t width);

// Throw stepmix::Error("metrics") when the shapes differ.
double mean_squared_error(const PlanarImage& a, const PlanarImage& b);
double mean_absolute_error(const PlanarImage& a, const PlanarImage& b);
// 10·log10(1 / mse); +inf when mse == 0.
double psnr_from_mse(double mse);

struct SsimOptions {
  int window = 7;  // odd; shrunk to fit small images
  double k1 = 0.01;
  double k2 = 0.03;
};
// Mean SSIM (see the file comment). Throws when an image is below 3×3.
double ssim(const PlanarImage& a, const PlanarImage& b, const SsimOptions& options = {});

// ||a − ref||₂ / ||ref||₂ over the whole vector: 0 when equal, +inf when the
// reference is zero and `a` is not.
double relative_l2_error(const std::vector<float>& a, const std::vector<float>& reference);

// Median (mean of the two middle values for an even count); NaN when empty.
double median(std::vector<double> values);

// Percentile bootstrap of the median: `resamples` draws of n values with
// replacement from a fixed-seed generator (std::mt19937_64, whose output the
// standard fixes), so the same inputs always give the same interval.
struct BootstrapInterval {
  double estimate = 0;  // median of the values themselves
  double low = 0;
  double high = 0;
};
BootstrapInterval bootstrap_median_interval(const std::vector<double>& values, double level = 0.95,
                                            int resamples = 2000, uint64_t seed = 20240601);

}  // namespace stepmix
