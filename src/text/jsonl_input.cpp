#include "text/jsonl_input.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "io/json_input.hpp"
#include "stepmix/error.hpp"
#include "text/unicode.hpp"

namespace stepmix::text {

void for_each_jsonl_object(const std::string& path, const std::string& component,
                           const std::function<void(const std::string&, const nlohmann::json&)>& handle) {
  std::ifstream file;
  if (path != "-") {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw Error(component, path + ": is a directory, expected a JSONL file");
    file.open(path, std::ios::binary);
    if (!file) throw Error(component, path + ": cannot open");
  }
  std::istream& in = path == "-" ? std::cin : file;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::string label = path + ": line " + std::to_string(number);
    require_utf8(line, component, label);
    const nlohmann::json object = parse_json_text(line, label, component);
    if (!object.is_object()) throw Error(component, label + ": expected a JSON object");
    handle(label, object);
  }
  if (in.bad()) throw Error(component, path + ": read error");
}

void print_json_line(std::FILE* f, const nlohmann::ordered_json& out) {
  const std::string line = out.dump(-1, ' ', /*ensure_ascii=*/true) + "\n";
  std::fwrite(line.data(), 1, line.size(), f);
}

}  // namespace stepmix::text
