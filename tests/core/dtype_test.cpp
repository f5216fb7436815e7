#include "core/dtype.hpp"

#include <gtest/gtest.h>

namespace stepmix {
namespace {

TEST(DType, NamesAndSizesAsSafetensorsSpellsThem) {
  const struct { DType t; const char* name; std::size_t size; } all[] = {
      {DType::F32, "F32", 4},         {DType::F16, "F16", 2},         {DType::BF16, "BF16", 2},
      {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1}, {DType::I64, "I64", 8},
      {DType::I32, "I32", 4},         {DType::U8, "U8", 1},           {DType::BOOL, "BOOL", 1},
  };
  for (const auto& d : all) {
    EXPECT_EQ(dtype_name(d.t), d.name);
    EXPECT_EQ(dtype_size(d.t), d.size);
    EXPECT_EQ(dtype_from_name(d.name), d.t);
  }
  EXPECT_FALSE(dtype_from_name("F8_E4M3FN").has_value());
  EXPECT_FALSE(dtype_from_name("f32").has_value());
  EXPECT_FALSE(dtype_from_name("F64").has_value());
}

}  // namespace
}  // namespace stepmix
