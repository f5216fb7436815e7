// Finding the first NaN or infinity in a buffer: weights at load
// (io/check_tensors.hpp), the latent after each denoising step, calibration
// statistics. Every floating dtype stepmix reads is tested on its bits, so the
// scan needs no conversion and a NaN payload cannot hide:
//   F32       exponent bits all ones        (bits & 0x7F800000) == 0x7F800000
//   F16       exponent bits all ones        (bits & 0x7C00) == 0x7C00
//   BF16      exponent bits all ones        (bits & 0x7F80) == 0x7F80
//   F8_E4M3   the two NaN codes 0x7F, 0xFF  (E4M3FN has no infinities)
//   F8_E5M2   exponent bits all ones        (bits & 0x7C) == 0x7C
// Integer and boolean dtypes are never non-finite.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.hpp"

namespace stepmix {

// Index of the first NaN or ±inf among `count` floats, or nullopt.
std::optional<std::size_t> first_non_finite(const float* values, std::size_t count);

// The same for `count` elements of `dtype` stored little-endian at `data`.
std::optional<std::size_t> first_non_finite(DType dtype, const void* data, std::size_t count);

// "NaN", "+inf" or "-inf" for element `index`, with the stored code for the
// 8- and 16-bit types ("NaN (code 0x7f)"), for messages.
std::string describe_non_finite(DType dtype, const void* data, std::size_t index);

}  // namespace stepmix
