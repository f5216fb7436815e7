// Reading untrusted JSON side files: size and nesting limits checked before
// parsing, and the file kinds that must never be read (FIFOs, devices).
#include "io/json_input.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "common/error_of.hpp"
#include "common/temp_dir.hpp"
#include "io/checkpoint.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

namespace fs = std::filesystem;

using test::error_of;

class JsonInputTest : public test::TempDirTest {};

TEST_F(JsonInputTest, NestingWithinTheLimitParses) {
  const std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_NO_THROW(check_json_nesting(ok, "x.json", "config"));
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  EXPECT_NE(error_of([&] { check_json_nesting(deep, "x.json", "config"); })
                .find("[config] x.json: JSON nested deeper than 64 levels (at byte 64)"),
            std::string::npos);
  // Objects count like arrays.
  EXPECT_THROW(check_json_nesting(R"({"a": {"b": [1]}})", "x.json", "config", 2), Error);
  EXPECT_NO_THROW(check_json_nesting(R"({"a": {"b": 1}, "c": [2]})", "x.json", "config", 2));
}

TEST_F(JsonInputTest, BracketsInStringsAndEscapesDoNotCount) {
  EXPECT_NO_THROW(check_json_nesting(R"(["[[[[{{{{", "\"[[[[", "\\", "]]]]"])", "x.json", "config", 1));
  // An escaped quote does not end the string, so the brackets after it are text.
  EXPECT_NO_THROW(check_json_nesting(R"(["a\"[[[["])", "x.json", "config", 1));
  EXPECT_THROW(check_json_nesting(R"(["a\\", [[1]]])", "x.json", "config", 2), Error);
}

TEST_F(JsonInputTest, ReadsRegularFilesWithinTheSizeLimit) {
  const std::string path = write_text("a.json", "{\"k\": 1}");
  EXPECT_EQ(read_small_file(path, "config"), "{\"k\": 1}");
  EXPECT_NE(error_of([&] { read_small_file(path, "config", 4); }).find("file is 8 bytes, more than the limit of 4 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_small_file((dir_ / "nope.json").string(), "config"); }).find("nope.json: cannot open"),
            std::string::npos);
}

TEST_F(JsonInputTest, RefusesFifosAndDevicesInsteadOfBlocking) {
  const std::string fifo = (dir_ / "config.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { read_small_file(fifo, "config"); }).find("config.json: not a regular file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_json_file(fifo, "config"); }).find("not a regular file"), std::string::npos);
  EXPECT_NE(error_of([&] { read_small_file("/dev/zero", "config"); }).find("/dev/zero: not a regular file"),
            std::string::npos);
}

TEST_F(JsonInputTest, ReadJsonFileRefusesDeepNesting) {
  const std::string path =
      write_text("config.json", "{\"quantization_config\": " + std::string(300000, '[') + std::string(300000, ']') + "}");
  EXPECT_NE(error_of([&] { read_json_file(path, "config"); }).find(path + ": JSON nested deeper than 64 levels"),
            std::string::npos);
}

TEST_F(JsonInputTest, NumbersOutsideTheDoubleRangeAreAStepmixError) {
  const std::string path = write_text("config.json", R"({"rope_theta": 1e400})");
  EXPECT_NE(error_of([&] { read_json_file(path, "config"); }).find(path + ": not valid JSON"), std::string::npos);
  EXPECT_NE(error_of([&] { parse_json_text("[-1e308336]", "x.json", "config"); }).find("[config] x.json: not valid JSON"),
            std::string::npos);
  EXPECT_EQ(parse_json_text(R"({"a": [1, 2.5]})", "x.json", "config")["a"][1], 2.5);
}

TEST_F(JsonInputTest, DuplicateKeysAreRefusedAtAnyDepth) {
  // nlohmann keeps the last of two keys silently; other readers keep the first.
  std::string e = error_of([] { parse_json_text(R"({"hidden_size": 64, "hidden_size": 4096})", "c.json", "config"); });
  EXPECT_NE(e.find("[config] c.json: key \"hidden_size\" appears twice in the top-level object"), std::string::npos)
      << e;
  e = error_of([] {
    parse_json_text(R"({"quantization_config": {"runtime": {"a": 1, "a": 2}}})", "c.json", "config");
  });
  EXPECT_NE(e.find("key \"a\" appears twice in the object at quantization_config.runtime"), std::string::npos) << e;
  e = error_of([] { parse_json_text(R"({"added_tokens": [{"id": 1}, {"id": 2, "id": 3}]})", "t.json", "tokenizer"); });
  EXPECT_NE(e.find("appears twice in the object at added_tokens[]"), std::string::npos) << e;
  // The same key in sibling objects is fine.
  EXPECT_NO_THROW(parse_json_text(R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 1}, {"k": 2}]})", "x", "config"));
  const std::string path = write_text("config.json", R"({"num_hidden_layers": 2, "num_hidden_layers": 36})");
  EXPECT_NE(error_of([&] { read_json_file(path, "config"); }).find(path + ": key \"num_hidden_layers\" appears twice"),
            std::string::npos);
}

TEST_F(JsonInputTest, IntegersAreReadWithoutWrapping) {
  using nlohmann::json;
  EXPECT_EQ(json_integer_in(json::parse("5"), 1, 10), 5);
  EXPECT_EQ(json_integer_in(json::parse("-3"), -5, 10), -3);
  EXPECT_FALSE(json_integer_in(json::parse("10000000000000000000"), 1, INT64_MAX));  // 10^19: get<int64_t> wraps
  EXPECT_FALSE(json_integer_in(json::parse("18446744073709551615"), -1, 0));         // 2^64 - 1 is not -1
  EXPECT_FALSE(json_integer_in(json::parse("11"), 1, 10));
  EXPECT_FALSE(json_integer_in(json::parse("2.0"), 1, 10));
  EXPECT_FALSE(json_integer_in(json::parse("true"), 0, 10));
  EXPECT_EQ(json_integer_in(json::parse("9223372036854775807"), 0, INT64_MAX), INT64_MAX);
}

}  // namespace
}  // namespace stepmix
