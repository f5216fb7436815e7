// Element types as safetensors spells them.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace stepmix {

enum class DType { F32, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, U8, BOOL };

// Bytes per element.
std::size_t dtype_size(DType t);
// Name as written in a safetensors header ("F8_E4M3", "BF16", ...).
std::string_view dtype_name(DType t);
// Inverse of dtype_name; nullopt for names stepmix does not know.
std::optional<DType> dtype_from_name(std::string_view name);
bool is_floating(DType t);

}  // namespace stepmix
