// Rounding policies for the elementwise scheduler kernels (see Precision).
// Each kernel is written once, in the reference's operation order, and
// instantiated with one of these; `round` is applied to every elementwise
// result and `scalar` to every host coefficient before it meets a tensor.
#pragma once

#include "core/numerics.hpp"

namespace stepmix::sched::detail {

struct RoundF32 {
  static float round(float x) { return x; }
  static float scalar(double c) { return float(c); }
};

struct RoundBF16 {
  static float round(float x) { return bf16_to_float(float_to_bf16_rne(x)); }
  // The reference computes the coefficient as a float32 0-d tensor, which
  // torch casts to the BF16 tensor's dtype before the operation.
  static float scalar(double c) { return round(float(c)); }
};

}  // namespace stepmix::sched::detail
