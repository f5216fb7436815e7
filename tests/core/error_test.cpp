// stepmix::Error: the component prefix, and messages that survive what()
// whole even when they quote a NUL from a file.
#include "stepmix/error.hpp"

#include <gtest/gtest.h>

#include <string>

namespace stepmix::test {
namespace {

TEST(Error, PrefixesTheComponent) {
  EXPECT_STREQ(Error("safetensors", "bad header").what(), "[safetensors] bad header");
  EXPECT_STREQ(Error("plain").what(), "plain");
}

TEST(Error, SpellsOutNulSoTheMessageIsNotCutShort) {
  const std::string name("a\0b", 3);
  EXPECT_STREQ(Error("safetensors", "tensor '" + name + "' is bad").what(), "[safetensors] tensor 'a\\u0000b' is bad");
  EXPECT_STREQ(Error(name).what(), "a\\u0000b");
}

}  // namespace
}  // namespace stepmix::test
