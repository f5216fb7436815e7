// The Qwen3 tokenizer goldens (tests/data/golden/qwen3-tokenizer): the JSONL
// cases and a tokenizer folder with the 11 MB tokenizer.json, which is kept
// gzip-compressed in the repository and decompressed here (zlib).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/golden.hpp"
#include "stepmix/error.hpp"

namespace stepmix::test {

inline std::string qwen3_path(const std::string& rel) { return data_path("golden/qwen3-tokenizer/" + rel); }

inline std::string gunzip_file(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw Error("test", path + ": cannot open");
  std::string out;
  char buffer[1 << 16];
  int n;
  while ((n = gzread(f, buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<std::size_t>(n));
  const bool ok = n == 0;
  gzclose(f);
  if (!ok) throw Error("test", path + ": not a valid gzip file");
  return out;
}

inline const std::string& qwen3_tokenizer_json() {
  static const std::string text = gunzip_file(qwen3_path("text_tokenizer/tokenizer.json.gz"));
  return text;
}

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("test", path + ": cannot open");
  std::vector<nlohmann::json> rows;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

// A tokenizer folder as a Cosmos3 checkpoint ships it (tokenizer.json,
// tokenizer_config.json, chat_template.jinja), written once per process and
// removed at exit.
class Qwen3Folder {
 public:
  static const std::string& path() {
    static const Qwen3Folder folder;
    return folder.dir_;
  }
  ~Qwen3Folder() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  Qwen3Folder() {
    dir_ = (std::filesystem::temp_directory_path() / ("stepmix_qwen3_" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/tokenizer.json", std::ios::binary) << qwen3_tokenizer_json();
    for (const char* f : {"tokenizer_config.json", "chat_template.jinja"})
      std::filesystem::copy_file(qwen3_path(std::string("text_tokenizer/") + f), dir_ + "/" + f);
  }
  std::string dir_;
};

}  // namespace stepmix::test
