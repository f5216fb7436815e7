// Helpers shared by the scheduler tests: golden tensors as vectors, the
// golden README's error metric, and the README's stand-in model.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/golden.hpp"
#include "core/dtype.hpp"
#include "io/safetensors.hpp"

namespace stepmix::sched::test {

inline std::shared_ptr<const SafetensorsFile> open_golden(const std::string& rel) {
  return SafetensorsFile::open(stepmix::test::golden_path(rel));
}

inline std::vector<float> f32(const SafetensorsFile& f, const std::string& name) {
  const TensorView& t = f.get(name);
  EXPECT_EQ(t.dtype, DType::F32) << name;
  const float* p = t.as<float>();
  return std::vector<float>(p, p + t.numel());
}

inline std::vector<std::int64_t> i64(const SafetensorsFile& f, const std::string& name) {
  const TensorView& t = f.get(name);
  EXPECT_EQ(t.dtype, DType::I64) << name;
  const std::int64_t* p = t.as<std::int64_t>();
  return std::vector<std::int64_t>(p, p + t.numel());
}

// Golden README §9: max|a − g| / max|g|.
inline double max_rel_err(const float* a, const float* g, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    num = std::max(num, std::fabs(double(a[i]) - double(g[i])));
    den = std::max(den, std::fabs(double(g[i])));
  }
  return den == 0 ? num : num / den;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Golden README §6: v(x, t) = float32(0.7·double(x) − 0.2·cos(0.01·double(t))).
inline void readme_model(const std::vector<float>& x, double t, std::vector<float>& v) {
  v.resize(x.size());
  const double shift = 0.2 * std::cos(0.01 * t);
  for (std::size_t i = 0; i < x.size(); ++i) v[i] = float(0.7 * double(x[i]) - shift);
}

}  // namespace stepmix::sched::test
