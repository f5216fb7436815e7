#include "io/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "io/json_input.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("safetensors", path + ": " + what);
}

[[noreturn]] void fail_tensor(const std::string& path, const std::string& name, const std::string& what) {
  fail(path, "tensor '" + name + "' " + what);
}

// A JSON integer >= 0 (not a bool, not a float).
bool is_count(const json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0); }

// Through snprintf: GCC 12 warns falsely (-Wrestrict) on "[" + std::to_string(a).
std::string range_string(uint64_t a, uint64_t b) {
  char text[48];
  std::snprintf(text, sizeof text, "[%llu,%llu)", (unsigned long long)a, (unsigned long long)b);
  return text;
}

// Parses the header JSON while rejecting duplicate keys, at the top level
// (two tensors of one name) and inside an entry (two dtypes): nlohmann keeps
// the last one silently, other readers may keep the first.
json parse_header(const std::string& path, const char* text, std::size_t n, const SafetensorsLimits& limits) {
  check_json_nesting(std::string_view(text, n), path + ": header", "safetensors", limits.max_json_depth);
  json header;
  std::optional<DuplicateJsonKey> duplicate;
  try {
    duplicate = parse_json_detecting_duplicates(std::string_view(text, n), header);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number such as 1e400
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (duplicate && duplicate->object_path.empty()) fail_tensor(path, duplicate->key, "appears twice in the header");
  if (duplicate)
    fail(path, "header: key " + json(duplicate->key).dump() + " appears twice in the entry of '" +
                   duplicate->object_path + "'");
  if (!header.is_object()) fail(path, "header must be a JSON object, got " + std::string(header.type_name()));
  return header;
}

struct ParsedEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

ParsedEntry parse_entry(const std::string& path, const std::string& name, const json& entry,
                        const SafetensorsLimits& limits, uint64_t data_size) {
  if (!entry.is_object()) fail_tensor(path, name, "entry must be an object");
  for (const auto& [key, _] : entry.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      fail_tensor(path, name, "has unknown field '" + key + "' (expected dtype, shape, data_offsets)");
  if (!entry.contains("dtype") || !entry["dtype"].is_string())
    fail_tensor(path, name, "dtype: expected a string such as \"F32\"");
  const std::string dtype_str = entry["dtype"].get<std::string>();
  const auto dtype = dtype_from_name(dtype_str);
  if (!dtype)
    fail_tensor(path, name, "dtype: unknown dtype '" + dtype_str +
                                "' (expected one of F32, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, U8, BOOL)");
  if (!entry.contains("shape") || !entry["shape"].is_array())
    fail_tensor(path, name, "shape: expected an array of non-negative integers");
  const json& shape_json = entry["shape"];
  if (int(shape_json.size()) > limits.max_rank)
    fail_tensor(path, name, "shape: rank " + std::to_string(shape_json.size()) + " exceeds the limit " +
                                std::to_string(limits.max_rank));
  ParsedEntry out{name, *dtype, {}, 0, 0};
  // Element count computed with overflow checks before anything trusts it.
  // The product of the non-zero dimensions must fit in int64: TensorView::numel()
  // and shape arithmetic downstream multiply left to right in int64, so
  // [2^32, 2^31, 0] (zero bytes) would overflow before the 0 is reached.
  uint64_t nonzero_product = 1;
  bool empty = false;
  for (const json& d : shape_json) {
    if (!is_count(d)) fail_tensor(path, name, "shape: expected non-negative integers, got " + shape_json.dump());
    const uint64_t dim = d.get<uint64_t>();
    if (dim == 0) {
      empty = true;
    } else if (nonzero_product > uint64_t(std::numeric_limits<int64_t>::max()) / dim) {
      fail_tensor(path, name, "shape " + shape_json.dump() + " overflows the element count");
    } else {
      nonzero_product *= dim;
    }
    out.shape.push_back(int64_t(dim));
  }
  const uint64_t numel = empty ? 0 : nonzero_product;
  const uint64_t elem = dtype_size(*dtype);
  if (numel > std::numeric_limits<uint64_t>::max() / elem)
    fail_tensor(path, name, "shape " + shape_json.dump() + " overflows the byte count");
  const uint64_t nbytes = numel * elem;

  if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2 ||
      !is_count(entry["data_offsets"][0]) || !is_count(entry["data_offsets"][1]))
    fail_tensor(path, name, "data_offsets: expected [begin, end] with non-negative integers");
  out.begin = entry["data_offsets"][0].get<uint64_t>();
  out.end = entry["data_offsets"][1].get<uint64_t>();
  if (out.begin > out.end)
    fail_tensor(path, name, "data_offsets " + range_string(out.begin, out.end) + " has begin after end");
  if (out.end > data_size)
    fail_tensor(path, name, "data_offsets " + range_string(out.begin, out.end) + " exceed the data area of " +
                                std::to_string(data_size) + " bytes");
  if (out.end - out.begin != nbytes)
    fail_tensor(path, name, "holds " + std::to_string(out.end - out.begin) + " bytes but " + std::string(dtype_str) +
                                " " + shape_json.dump() + " needs " + std::to_string(nbytes));
  return out;
}

}  // namespace

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const std::string& path,
                                                             const SafetensorsLimits& limits) {
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;

  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
  // forever (a shard named in an index, or --noise); it is refused below as
  // not a regular file. Regular files ignore the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  const uint64_t file_size = uint64_t(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    fail(path, "file is " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  }
  void* map = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) fail(path, std::string("cannot map: ") + std::strerror(errno));
  file->map_ = map;
  file->map_size_ = file_size;
  file->bytes_ = static_cast<const std::byte*>(map);
  file->parse(file_size, limits);
  return file;
}

void SafetensorsFile::parse(std::size_t size, const SafetensorsLimits& limits) {
  const std::byte* bytes = bytes_;
  const uint64_t file_size = size;
  if (file_size < 8) fail(path_, "file is " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);  // little-endian hosts only (x86-64, aarch64)
  if (header_len > limits.max_header_bytes)
    fail(path_, "header length " + std::to_string(header_len) + " exceeds the limit of " +
                   std::to_string(limits.max_header_bytes) + " bytes");
  if (header_len > file_size - 8)
    fail(path_, "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                   std::to_string(file_size) + " bytes)");
  const json header = parse_header(path_, reinterpret_cast<const char*>(bytes + 8), header_len, limits);
  if (header.size() > limits.max_tensors + 1)
    fail(path_, "header lists " + std::to_string(header.size()) + " entries, more than the limit of " +
                   std::to_string(limits.max_tensors));

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = file_size - data_start;
  std::vector<ParsedEntry> entries;
  entries.reserve(header.size());
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(path_, "__metadata__ must be an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail(path_, "__metadata__." + k + ": expected a string value");
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path_, name, entry, limits, data_size));
  }

  // Overlap check over tensors sorted by start (empty tensors cannot overlap).
  std::vector<const ParsedEntry*> by_offset;
  for (const auto& e : entries)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const ParsedEntry* a, const ParsedEntry* b) { return a->begin < b->begin; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      fail_tensor(path_, by_offset[i]->name,
                  "data_offsets " + range_string(by_offset[i]->begin, by_offset[i]->end) + " overlap tensor '" +
                      by_offset[i - 1]->name + "' " + range_string(by_offset[i - 1]->begin, by_offset[i - 1]->end));

  // The format requires the tensors to cover the data area exactly: bytes
  // no tensor owns could carry anything (a second file format, hidden data)
  // and say the header and the data disagree.
  uint64_t covered = 0;
  for (const ParsedEntry* e : by_offset) {
    if (e->begin != covered)
      fail(path_, "data area bytes " + range_string(covered, e->begin) + " belong to no tensor (before tensor '" +
                      e->name + "'); the tensors must cover the data area without holes");
    covered = e->end;
  }
  if (covered != data_size)
    fail(path_, "data area bytes " + range_string(covered, data_size) + " (after the last tensor) belong to no tensor; "
                "the tensors must cover the data area without holes");

  for (auto& e : entries) {
    // Writers pad the header so every tensor is aligned to its element size;
    // a misaligned tensor cannot be read through typed pointers.
    if ((data_start + e.begin) % dtype_size(e.dtype) != 0)
      fail_tensor(path_, e.name, "starts at file offset " + std::to_string(data_start + e.begin) +
                                     ", not a multiple of its element size " + std::to_string(dtype_size(e.dtype)));
    TensorView v;
    v.name = e.name;
    v.dtype = e.dtype;
    v.shape = std::move(e.shape);
    v.data = bytes + data_start + e.begin;
    v.nbytes = std::size_t(e.end - e.begin);
    v.file = path_;
    tensors_.emplace(e.name, std::move(v));
  }
}

std::shared_ptr<const SafetensorsFile> SafetensorsFile::parse_bytes(const std::string& label, const void* data,
                                                                    std::size_t size, const SafetensorsLimits& limits) {
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = label;
  file->owned_.resize(size);
  if (size) std::memcpy(file->owned_.data(), data, size);
  file->bytes_ = file->owned_.data();
  file->parse(size, limits);
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const TensorView& SafetensorsFile::get(const std::string& name) const {
  if (const TensorView* v = find(name)) return *v;
  fail_tensor(path_, name, "not found");
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, _] : tensors_) out.push_back(name);
  return out;
}

TensorToWrite make_tensor_raw(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                              std::size_t nbytes) {
  TensorToWrite t{name, dtype, std::move(shape), std::vector<std::byte>(nbytes)};
  if (nbytes) std::memcpy(t.bytes.data(), data, nbytes);
  return t;
}

TensorToWrite make_tensor_f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
  return make_tensor_raw(name, DType::F32, std::move(shape), v.data(), v.size() * sizeof(float));
}

std::string encode_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  std::vector<const TensorToWrite*> order;
  std::set<std::string> names;
  for (const auto& t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= uint64_t(d);
    if (numel * dtype_size(t.dtype) != t.bytes.size())
      throw Error("safetensors", path + ": tensor '" + t.name + "' has " + std::to_string(t.bytes.size()) +
                                     " bytes but its shape needs " + std::to_string(numel * dtype_size(t.dtype)));
    if (!names.insert(t.name).second) throw Error("safetensors", path + ": tensor '" + t.name + "' given twice");
    order.push_back(&t);
  }
  // Largest elements first keeps every tensor aligned to its element size.
  std::sort(order.begin(), order.end(), [](const TensorToWrite* a, const TensorToWrite* b) {
    const auto sa = dtype_size(a->dtype), sb = dtype_size(b->dtype);
    return sa != sb ? sa > sb : a->name < b->name;
  });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto* t : order) {
    header[t->name] = {{"dtype", std::string(dtype_name(t->dtype))},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + t->bytes.size()}}};
    offset += t->bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + text.size() + offset);
  const uint64_t n = text.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += text;
  for (const auto* t : order) out.append(reinterpret_cast<const char*>(t->bytes.data()), t->bytes.size());
  return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, encode_safetensors(path, tensors, metadata));
}

}  // namespace stepmix
