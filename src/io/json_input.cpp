#include "io/json_input.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "stepmix/error.hpp"

namespace stepmix {

std::string read_small_file(const std::string& path, const std::string& component, std::uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error(component, path + ": cannot open: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw Error(component, path + ": not a regular file");
  const auto size = std::uint64_t(st.st_size);
  if (size > max_bytes)
    throw Error(component, path + ": file is " + std::to_string(size) + " bytes, more than the limit of " +
                               std::to_string(max_bytes) + " bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(component, path + ": cannot open");
  std::string text(std::size_t(size), '\0');
  in.read(text.data(), std::streamsize(size));
  // A file that shrank since stat() is read as far as it goes.
  text.resize(std::size_t(in.gcount()));
  return text;
}

void check_json_nesting(std::string_view text, const std::string& label, const std::string& component,
                        int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        throw Error(component, label + ": JSON nested deeper than " + std::to_string(max_depth) + " levels (at byte " +
                                   std::to_string(i) + ")");
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced text is the parser's to reject
    }
  }
}

nlohmann::json parse_json_text(std::string_view text, const std::string& label, const std::string& component) {
  check_json_nesting(text, label, component);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(component, label + ": not valid JSON: " + e.what());
  }
}

}  // namespace stepmix
