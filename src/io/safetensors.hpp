// safetensors reading (memory-mapped, zero-copy, fully validated) and writing.
//
// File layout: u64 little-endian header length N, N bytes of JSON, then the
// data area. Every header entry except "__metadata__" is
//   {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}
// with offsets relative to the start of the data area.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.hpp"
#include "io/output_set.hpp"  // write_file_atomic, used by every writer

namespace stepmix {

// Limits checked before anything is allocated or mapped.
struct SafetensorsLimits {
  std::uint64_t max_header_bytes = 256ull << 20;  // 256 MiB of JSON
  std::size_t max_tensors = 1u << 20;
  int max_rank = 8;
  int max_json_depth = 64;  // a valid header nests 3 levels (io/json_input.hpp)
};

class SafetensorsFile {
 public:
  // Maps `path` read-only and validates the header; throws stepmix::Error
  // naming the file, the tensor and the problem.
  static std::shared_ptr<const SafetensorsFile> open(const std::string& path,
                                                     const SafetensorsLimits& limits = {});
  // Parses bytes already in memory (the file is copied); `label` names it in
  // errors. Same validation as open(); used by fuzzing and tests.
  static std::shared_ptr<const SafetensorsFile> parse_bytes(const std::string& label, const void* data,
                                                            std::size_t size, const SafetensorsLimits& limits = {});
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // Throws if absent.
  const TensorView& get(const std::string& name) const;
  const TensorView* find(const std::string& name) const;
  // Sorted by name.
  std::vector<std::string> names() const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  // Validates the header of bytes_[0, size_) and builds the views.
  void parse(std::size_t size, const SafetensorsLimits& limits);

  std::string path_;
  void* map_ = nullptr;  // mmap'ed file, or null when the bytes are owned
  std::size_t map_size_ = 0;
  std::vector<std::byte> owned_;
  const std::byte* bytes_ = nullptr;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: bytes are copied as given (little-endian).
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};

// Helpers to build TensorToWrite from typed data.
TensorToWrite make_tensor_f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v);
TensorToWrite make_tensor_raw(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                              std::size_t nbytes);

// Writes a safetensors file: tensors ordered by element size (largest first),
// then name, header padded with spaces to a multiple of 8. The file is written
// under a temporary name and renamed into place, so an interrupted write never
// leaves a partial file at `path`.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The bytes write_safetensors writes (`path` only names the file in errors),
// for outputs staged as a set (io/output_set.hpp).
std::string encode_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

}  // namespace stepmix
