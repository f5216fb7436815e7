#include "text/cosmos3_prompt.hpp"

#include <charconv>
#include <cmath>

#include "io/json_input.hpp"
#include "stepmix/error.hpp"
#include "stepmix/model.hpp"

namespace stepmix::text {
namespace {

using json = nlohmann::json;

// Height first: "720x1280".
std::string resolution(const Cosmos3PromptRequest& r) {
  return std::to_string(request_height(r)) + "x" + std::to_string(request_width(r));
}

}  // namespace

std::string format_fixed(double value, int decimals) {
  // std::to_chars with a precision formats as printf's %.*f does in the C
  // locale, from the exact binary value, ties to even.
  char buffer[400];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed, decimals);
  if (ec != std::errc()) throw Error("prompt", "cannot format " + std::to_string(value));
  return std::string(buffer, end);
}

std::string append_sentence(std::string_view base, std::string_view sentence) {
  std::size_t n = base.size();
  while (n > 0 && base[n - 1] == '.') --n;
  if (n == 0) return std::string(sentence);
  std::string out(base.substr(0, n));
  out += ". ";
  out += sentence;
  return out;
}

std::string cosmos3_system_prompt(bool image) {
  // "give", not "given": the wording the models were trained with.
  return std::string("You are a helpful assistant who will generate ") + (image ? "images" : "videos") +
         " from a give prompt.";
}

Cosmos3Texts cosmos3_texts(const Cosmos3PromptRequest& r, bool use_system_prompt) {
  if (request_height(r) < 1)
    throw Error("prompt", "height: expected a positive integer, got " + std::to_string(request_height(r)));
  if (request_width(r) < 1) throw Error("prompt", "width: expected a positive integer, got " + std::to_string(request_width(r)));
  if (r.num_frames < 1)
    throw Error("prompt", "num_frames: expected a positive integer, got " + std::to_string(r.num_frames));
  // The frame rate a generation accepts: a tiny one makes the duration
  // sentence's seconds overflow.
  if (!(r.fps >= kMinFps && r.fps <= kMaxFps))
    throw Error("prompt", "fps: expected a number in [" + Error::number(kMinFps) + ", " + Error::number(kMaxFps) +
                              "], got " + Error::number(r.fps));

  const bool image = is_image_request(r);
  Cosmos3Texts t;
  t.positive = r.prompt;
  t.negative = r.negative_prompt.value_or("");
  if (!image && r.duration_sentence) {
    const std::string duration = format_fixed(double(r.num_frames) / r.fps, 1);
    const std::string fps = format_fixed(r.fps, 0);
    t.positive = append_sentence(t.positive, "The video is " + duration + " seconds long and is of " + fps + " FPS.");
    t.negative =
        append_sentence(t.negative, "The video is not " + duration + " seconds long and is not of " + fps + " FPS.");
  }
  if (r.resolution_sentence) {
    const std::string what = image ? "This image is " : "This video is ";
    t.positive = append_sentence(t.positive, what + "of " + resolution(r) + " resolution.");
    t.negative = append_sentence(t.negative, what + "not of " + resolution(r) + " resolution.");
  }
  if (use_system_prompt) t.system = cosmos3_system_prompt(image);
  return t;
}

Cosmos3PromptRequest cosmos3_request_from_json(const json& o, const std::string& label) {
  auto fail = [&](const std::string& field, const std::string& expected, const json& got) {
    throw Error("prompt", label + ": " + field + ": expected " + expected + ", got " + json_excerpt(got));
  };
  if (!o.is_object()) throw Error("prompt", label + ": expected a JSON object, got " + json_excerpt(o));
  Cosmos3PromptRequest r;
  bool have_prompt = false;
  auto integer = [&](const std::string& key, const json& v) {
    if (!v.is_number_integer()) fail(key, "an integer", v);
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) fail(key, "an integer", v);
    return v.get<int64_t>();
  };
  auto boolean = [&](const std::string& key, const json& v) {
    if (!v.is_boolean()) fail(key, "true or false", v);
    return v.get<bool>();
  };
  std::optional<std::string> mode;
  for (const auto& [key, v] : o.items()) {
    if (key == "id" || key == "note") {
      continue;
    } else if (key == "prompt") {
      if (!v.is_string()) fail(key, "a string", v);
      r.prompt = v.get<std::string>();
      have_prompt = true;
    } else if (key == "negative_prompt") {
      if (!v.is_null() && !v.is_string()) fail(key, "a string or null", v);
      if (v.is_string()) r.negative_prompt = v.get<std::string>();
    } else if (key == "height") {
      r.height = integer(key, v);
    } else if (key == "width") {
      r.width = integer(key, v);
    } else if (key == "num_frames") {
      r.num_frames = integer(key, v);
    } else if (key == "fps") {
      if (!v.is_number()) fail(key, "a number", v);
      r.fps = v.get<double>();
    } else if (key == "use_system_prompt") {
      if (!v.is_null()) r.use_system_prompt = boolean(key, v);
    } else if (key == "resolution_sentence") {
      r.resolution_sentence = boolean(key, v);
    } else if (key == "duration_sentence") {
      r.duration_sentence = boolean(key, v);
    } else if (key == "mode") {
      if (!v.is_string() || (v != "image" && v != "video")) fail(key, "\"image\" or \"video\"", v);
      mode = v.get<std::string>();
    } else {
      throw Error("prompt", label + ": unknown field \"" + key +
                                "\" (expected id, note, prompt, negative_prompt, height, width, num_frames, fps, "
                                "use_system_prompt, resolution_sentence, duration_sentence, mode)");
    }
  }
  if (!have_prompt) throw Error("prompt", label + ": prompt: required");
  if (mode && (*mode == "image") != is_image_request(r))
    throw Error("prompt", label + ": mode: \"" + *mode + "\" does not match num_frames " + std::to_string(r.num_frames) +
                              " (image iff num_frames is 1)");
  return r;
}

}  // namespace stepmix::text
