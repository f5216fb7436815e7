#include "io/json_input.hpp"

#include <unordered_set>
#include <vector>

#include "io/file_access.hpp"
#include "stepmix/error.hpp"

namespace stepmix {

std::string read_small_file(const std::string& path, const std::string& component, std::uint64_t max_bytes) {
  return read_regular_file(path, max_bytes, component);
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

std::optional<DuplicateJsonKey> parse_json_detecting_duplicates(std::string_view text, nlohmann::json& out) {
  using json = nlohmann::json;
  // One frame per open object or array: the keys seen so far (objects) and
  // the key of the member being parsed, to name where a duplicate sits.
  struct Frame {
    bool object = false;
    std::unordered_set<std::string> keys;
    std::string current;
  };
  std::vector<Frame> frames;
  std::optional<DuplicateJsonKey> duplicate;
  auto where = [&] {
    std::string path;
    for (std::size_t i = 0; i + 1 < frames.size(); ++i) {
      if (frames[i].object)
        path += (path.empty() ? "" : ".") + frames[i].current;
      else
        path += "[]";
    }
    return path;
  };
  auto on_event = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: frames.push_back({true, {}, {}}); break;
      case json::parse_event_t::array_start: frames.push_back({false, {}, {}}); break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!frames.empty()) frames.pop_back();
        break;
      case json::parse_event_t::key: {
        Frame& f = frames.back();
        f.current = parsed.get<std::string>();
        if (!f.keys.insert(f.current).second && !duplicate) duplicate = DuplicateJsonKey{f.current, where()};
        break;
      }
      case json::parse_event_t::value: break;
    }
    return true;
  };
  out = json::parse(text.begin(), text.end(), on_event);
  return duplicate;
}

nlohmann::json parse_json_text(std::string_view text, const std::string& label, const std::string& component) {
  check_json_nesting(text, label, component);
  nlohmann::json out;
  std::optional<DuplicateJsonKey> duplicate;
  try {
    duplicate = parse_json_detecting_duplicates(text, out);
  } catch (const nlohmann::json::exception& e) {
    throw Error(component, label + ": not valid JSON: " + e.what());
  }
  if (duplicate)
    throw Error(component, label + ": key " + nlohmann::json(duplicate->key).dump() + " appears twice in " +
                               (duplicate->object_path.empty() ? std::string("the top-level object")
                                                               : "the object at " + duplicate->object_path) +
                               " (JSON readers disagree on which one counts)");
  return out;
}

std::optional<std::int64_t> json_integer_in(const nlohmann::json& value, std::int64_t lo, std::int64_t hi) {
  if (value.is_number_unsigned()) {
    const auto v = value.get<std::uint64_t>();
    if (hi < 0 || v > std::uint64_t(hi) || (lo > 0 && v < std::uint64_t(lo))) return std::nullopt;
    return std::int64_t(v);
  }
  if (value.is_number_integer()) {
    const auto v = value.get<std::int64_t>();
    if (v < lo || v > hi) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

std::string json_excerpt(const nlohmann::json& value) {
  std::string s = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

}  // namespace stepmix
