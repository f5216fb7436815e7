#include "io/safetensors.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/golden.hpp"
#include "common/temp_dir.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public test::TempDirTest {
 protected:
  // A file with the given header text and `data_bytes` zero bytes of data.
  std::string write_raw(const std::string& header, std::size_t data_bytes, std::size_t declared_len = SIZE_MAX) {
    const uint64_t n = declared_len == SIZE_MAX ? header.size() : declared_len;
    std::string bytes(reinterpret_cast<const char*>(&n), 8);
    bytes += header;
    bytes.append(data_bytes, '\0');
    return write_bytes("f.safetensors", bytes);
  }

  // Expects open() to throw with a message containing every fragment.
  void expect_rejected(const std::string& path, std::initializer_list<std::string> fragments) {
    try {
      SafetensorsFile::open(path);
      FAIL() << "accepted a malformed file";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("[safetensors] " + path), std::string::npos) << msg;
      for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
    }
  }
};

TEST_F(SafetensorsTest, WriteThenReadRoundTrip) {
  const std::string path = (dir_ / "rt.safetensors").string();
  const uint8_t codes[3] = {0x38, 0x7E, 0x80};
  const uint16_t halves[2] = {0x3F80, 0xC000};
  write_safetensors(path,
                    {make_tensor_f32("b", {2, 2}, {1, 2, 3, 4}), make_tensor_raw("a", DType::F8_E4M3, {3}, codes, 3),
                     make_tensor_raw("c", DType::BF16, {2}, halves, 4), make_tensor_f32("scalar", {}, {0.5f})},
                    {{"format", "pt"}});
  auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f->names(), (std::vector<std::string>{"a", "b", "c", "scalar"}));
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const auto& b = f->get("b");
  EXPECT_EQ(b.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(b.as<float>()[3], 4.0f);
  EXPECT_EQ(f->get("a").as<uint8_t>()[1], 0x7E);
  EXPECT_EQ(f->get("c").as<uint16_t>()[1], 0xC000);
  EXPECT_EQ(f->get("scalar").numel(), 1);
  EXPECT_EQ(f->get("scalar").rank(), 0);
  // Every tensor starts at a multiple of its element size.
  for (const auto& [name, v] : f->tensors())
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % dtype_size(v.dtype), 0u) << name;
  EXPECT_FALSE(fs::exists(path + ".tmp." + std::to_string(::getpid())));
  EXPECT_THROW(f->get("missing"), Error);
}

TEST_F(SafetensorsTest, ReadsEveryGoldenFile) {
  for (const auto& entry : fs::recursive_directory_iterator(test::golden_path(""))) {
    if (entry.path().extension() != ".safetensors") continue;
    auto f = SafetensorsFile::open(entry.path().string());
    EXPECT_FALSE(f->tensors().empty()) << entry.path();
  }
  auto w = SafetensorsFile::open(test::golden_path("transformer-fp8/diffusion_pytorch_model.safetensors"));
  const auto& q = w->get("layers.0.self_attn.add_q_proj.weight");
  EXPECT_EQ(q.dtype, DType::F8_E4M3);
  EXPECT_EQ(q.shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(w->get("layers.0.self_attn.add_q_proj.weight_scale").rank(), 0);
}

TEST_F(SafetensorsTest, RejectsFileShorterThanHeaderLength) {
  const std::string path = write_text("tiny.safetensors", "abc");
  expect_rejected(path, {"shorter than the 8-byte header length"});
}

TEST_F(SafetensorsTest, RejectsHeaderLengthPastEndOfFile) {
  expect_rejected(write_raw("{}", 0, 4096), {"header length 4096 runs past the end of the file"});
}

TEST_F(SafetensorsTest, RejectsHugeHeaderLengthBeforeAllocating) {
  expect_rejected(write_raw("{}", 0, uint64_t(1) << 62), {"exceeds the limit"});
}

TEST_F(SafetensorsTest, RejectsMalformedJson) {
  expect_rejected(write_raw(R"({"a": {"dtype": "F32", )", 0), {"not valid JSON"});
  expect_rejected(write_raw(R"([1, 2])", 0), {"must be a JSON object"});
}

TEST_F(SafetensorsTest, RejectsNumbersOutsideTheDoubleRange) {
  // nlohmann reports 1e400 as out_of_range, not parse_error; it must still be
  // a stepmix error naming the file.
  expect_rejected(write_raw(R"({"w": {"dtype": "F32", "shape": [-1e400], "data_offsets": [0, 0]}})", 0),
                  {"header is not valid JSON", "number overflow"});
}

TEST_F(SafetensorsTest, RejectsUnknownDtype) {
  expect_rejected(write_raw(R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8),
                  {"tensor 'w'", "unknown dtype 'F64'"});
}

TEST_F(SafetensorsTest, RejectsShapeByteMismatch) {
  expect_rejected(write_raw(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8),
                  {"tensor 'w'", "holds 8 bytes", "needs 12"});
}

TEST_F(SafetensorsTest, RejectsOffsetsOutsideDataArea) {
  expect_rejected(write_raw(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8),
                  {"tensor 'w'", "data_offsets [0,16) exceed the data area of 8 bytes"});
  expect_rejected(write_raw(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 8),
                  {"begin after end"});
}

TEST_F(SafetensorsTest, RejectsOverlappingTensors) {
  expect_rejected(write_raw(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                               "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                            16),
                  {"tensor 'b'", "overlap tensor 'a'"});
}

TEST_F(SafetensorsTest, RejectsDuplicateNames) {
  expect_rejected(write_raw(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                               "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                            2),
                  {"tensor 'a'", "appears twice"});
}

TEST_F(SafetensorsTest, RejectsBadShapesAndOffsets) {
  expect_rejected(write_raw(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}})", 0),
                  {"tensor 'w'", "non-negative integers"});
  expect_rejected(write_raw(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 0]}})", 0),
                  {"non-negative integers"});
  expect_rejected(write_raw(R"({"w": {"dtype": "U8", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 0]}})", 0),
                  {"overflows"});
  expect_rejected(write_raw(R"({"w": {"dtype": "U8", "shape": [1,1,1,1,1,1,1,1,1], "data_offsets": [0, 1]}})", 1),
                  {"rank 9 exceeds"});
  expect_rejected(write_raw(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0]}})", 1),
                  {"data_offsets: expected [begin, end]"});
  expect_rejected(write_raw(R"({"w": {"dtype": "U8", "shape": [1]}})", 1), {"data_offsets"});
  expect_rejected(write_raw(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "x": 1}})", 1),
                  {"unknown field 'x'"});
  expect_rejected(write_raw(R"({"w": 5})", 0), {"tensor 'w'", "entry must be an object"});
  expect_rejected(write_raw(R"({"__metadata__": {"k": 1}})", 0), {"__metadata__.k"});
}

TEST_F(SafetensorsTest, RejectsEmptyTensorWhoseLeadingDimsOverflowInt64) {
  // Zero bytes, but 2^32 · 2^31 = 2^63 overflows the int64 element count
  // TensorView::numel() computes before it reaches the 0.
  expect_rejected(write_raw(R"({"w": {"dtype": "F32", "shape": [4294967296, 2147483648, 0], "data_offsets": [0, 0]}})", 0),
                  {"tensor 'w'", "overflows the element count"});
  // The same dims with a smaller product are a valid empty tensor (U8: any
  // offset is aligned).
  const std::string ok = write_raw(R"({"w": {"dtype": "U8", "shape": [4294967296, 1024, 0], "data_offsets": [0, 0]}})", 0);
  auto f = SafetensorsFile::open(ok);
  EXPECT_EQ(f->get("w").numel(), 0);
  EXPECT_EQ(f->get("w").nbytes, 0u);
}

TEST_F(SafetensorsTest, RejectsDeeplyNestedHeaderBeforeParsing) {
  // A shape nested 100000 levels deep would overflow the stack when the error
  // message quotes it (nlohmann's dump() recurses).
  const std::string deep(100000, '[');
  const std::string header = R"({"w": {"dtype": "F32", "shape": )" + deep + std::string(100000, ']') + "}}";
  expect_rejected(write_raw(header, 0), {"header: JSON nested deeper than 64 levels"});
}

TEST_F(SafetensorsTest, RejectsMisalignedTensor) {
  const std::string header = R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})";
  ASSERT_NE((8 + header.size()) % 4, 0u);
  expect_rejected(write_raw(header, 4), {"tensor 'w'", "not a multiple of its element size 4"});
}

TEST_F(SafetensorsTest, ParsesBytesInMemoryWithTheSameChecks) {
  const std::string path = (dir_ / "mem.safetensors").string();
  write_safetensors(path, {make_tensor_f32("x", {2}, {1.5f, 2.5f})});
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto f = SafetensorsFile::parse_bytes("memory", bytes.data(), bytes.size());
  EXPECT_EQ(f->get("x").as<float>()[1], 2.5f);
  EXPECT_THROW(SafetensorsFile::parse_bytes("memory", bytes.data(), bytes.size() - 1), Error);
  EXPECT_THROW(SafetensorsFile::parse_bytes("memory", bytes.data(), 3), Error);
}

TEST_F(SafetensorsTest, RejectsTruncatedGoldenFile) {
  const std::string src = test::golden_path("transformer-fp8/diffusion_pytorch_model.safetensors");
  const std::string path = (dir_ / "trunc.safetensors").string();
  fs::copy_file(src, path);
  fs::resize_file(path, fs::file_size(src) - 100);
  expect_rejected(path, {"exceed the data area"});
}

TEST_F(SafetensorsTest, RefusesFifosAndDevicesWithoutBlocking) {
  // Opening a FIFO for reading blocks until a writer appears, unless it is
  // opened non-blocking: this test would hang without that.
  const std::string fifo = (dir_ / "shard.safetensors").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_rejected(fifo, {fifo, "not a regular file"});
  expect_rejected("/dev/zero", {"/dev/zero", "not a regular file"});
  expect_rejected(dir_.string(), {"not a regular file"});
}

TEST_F(SafetensorsTest, MissingFileIsAClearError) {
  expect_rejected((dir_ / "nope.safetensors").string(), {"cannot open"});
}

TEST_F(SafetensorsTest, WriterRejectsInconsistentTensors) {
  const std::string path = (dir_ / "bad.safetensors").string();
  EXPECT_THROW(write_safetensors(path, {make_tensor_f32("a", {3}, {1, 2})}), Error);
  EXPECT_THROW(write_safetensors(path, {make_tensor_f32("a", {1}, {1}), make_tensor_f32("a", {1}, {1})}), Error);
  EXPECT_FALSE(fs::exists(path));
}

// The format requires the tensors to cover the data area exactly: unowned
// bytes (a gap, trailing data) could carry a second file format.
TEST_F(SafetensorsTest, RejectsHolesInTheDataArea) {
  const std::string two = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, )"
                          R"("b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})";
  expect_rejected(write_raw(two + std::string(8 - two.size() % 8, ' '), 12),
                  {"data area bytes [4,8) belong to no tensor (before tensor 'b')", "without holes"});
  const std::string one = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})";
  expect_rejected(write_raw(one + std::string(8 - one.size() % 8, ' '), 12),
                  {"data area bytes [4,12) (after the last tensor) belong to no tensor"});
  const std::string late = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
  expect_rejected(write_raw(late + std::string(8 - late.size() % 8, ' '), 8),
                  {"data area bytes [0,4) belong to no tensor (before tensor 'a')"});
  // Data with no tensors at all, and empty tensors anywhere, are judged the same way.
  expect_rejected(write_raw("{}      ", 4), {"data area bytes [0,4) (after the last tensor)"});
  const std::string with_empty = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, )"
                                 R"("e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})";
  EXPECT_NO_THROW(SafetensorsFile::open(write_raw(with_empty + std::string(8 - with_empty.size() % 8, ' '), 4)));
}

TEST_F(SafetensorsTest, RejectsDuplicateKeysInsideAnEntry) {
  // {"dtype": "F32", "dtype": "BF16"}: nlohmann keeps the last, other readers the first.
  const std::string header = R"({"a": {"dtype": "F32", "dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}})";
  expect_rejected(write_raw(header + std::string(8 - header.size() % 8, ' '), 4),
                  {"header: key \"dtype\" appears twice in the entry of 'a'"});
}

}  // namespace
}  // namespace stepmix
