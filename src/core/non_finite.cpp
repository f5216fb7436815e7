#include "core/non_finite.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/numerics.hpp"

namespace stepmix {
namespace {

// Blocks are tested with a branch-free OR over the predicate (which the
// compiler vectorises), then searched element by element only when one hit.
constexpr std::size_t kBlock = 4096;

template <class Bits, class IsBad>
std::optional<std::size_t> scan(const void* data, std::size_t count, IsBad is_bad) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t start = 0; start < count; start += kBlock) {
    const std::size_t n = std::min(kBlock, count - start);
    unsigned any = 0;  // an integer OR-reduction vectorises; a bool one does not
    for (std::size_t i = 0; i < n; ++i) {
      Bits v;
      std::memcpy(&v, bytes + (start + i) * sizeof(Bits), sizeof(Bits));  // mapped data may be unaligned
      any |= unsigned(is_bad(v));
    }
    if (!any) continue;
    for (std::size_t i = 0; i < n; ++i) {
      Bits v;
      std::memcpy(&v, bytes + (start + i) * sizeof(Bits), sizeof(Bits));
      if (is_bad(v)) return start + i;
    }
  }
  return std::nullopt;
}

// Function objects (not function pointers), so that each scan is inlined
// and vectorised.
constexpr auto f32_bad = [](uint32_t b) { return (b & 0x7F800000u) == 0x7F800000u; };
constexpr auto f16_bad = [](uint16_t b) { return (b & 0x7C00u) == 0x7C00u; };
constexpr auto bf16_bad = [](uint16_t b) { return (b & 0x7F80u) == 0x7F80u; };
constexpr auto e4m3_bad = [](uint8_t b) { return (b & 0x7Fu) == 0x7Fu; };
constexpr auto e5m2_bad = [](uint8_t b) { return (b & 0x7Cu) == 0x7Cu; };

std::string sign_and_kind(float v) {
  if (std::isnan(v)) return "NaN";
  return v > 0 ? "+inf" : "-inf";
}

}  // namespace

std::optional<std::size_t> first_non_finite(const float* values, std::size_t count) {
  return scan<uint32_t>(values, count, f32_bad);
}

std::optional<std::size_t> first_non_finite(DType dtype, const void* data, std::size_t count) {
  switch (dtype) {
    case DType::F32: return scan<uint32_t>(data, count, f32_bad);
    case DType::F16: return scan<uint16_t>(data, count, f16_bad);
    case DType::BF16: return scan<uint16_t>(data, count, bf16_bad);
    case DType::F8_E4M3: return scan<uint8_t>(data, count, e4m3_bad);
    case DType::F8_E5M2: return scan<uint8_t>(data, count, e5m2_bad);
    case DType::I64:
    case DType::I32:
    case DType::U8:
    case DType::BOOL: return std::nullopt;
  }
  return std::nullopt;
}

std::string describe_non_finite(DType dtype, const void* data, std::size_t index) {
  const auto* bytes = static_cast<const unsigned char*>(data) + index * dtype_size(dtype);
  char code[32];
  switch (dtype) {
    case DType::F32: {
      float v;
      std::memcpy(&v, bytes, 4);
      return sign_and_kind(v);
    }
    case DType::F16:
    case DType::BF16: {
      uint16_t b;
      std::memcpy(&b, bytes, 2);
      std::snprintf(code, sizeof code, " (code 0x%04x)", b);
      return sign_and_kind(dtype == DType::F16 ? f16_to_float(b) : bf16_to_float(b)) + code;
    }
    case DType::F8_E4M3:
    case DType::F8_E5M2:
      std::snprintf(code, sizeof code, " (code 0x%02x)", bytes[0]);
      return sign_and_kind(dtype == DType::F8_E4M3 ? e4m3_to_float(bytes[0]) : e5m2_to_float(bytes[0])) + code;
    default: return "finite";
  }
}

}  // namespace stepmix
