// The text a Cosmos3 checkpoint was trained to see: the user's prompt with
// two metadata sentences appended (duration for videos, resolution), the
// negated sentences for the negative prompt, and the image or video system
// message. Pure string logic; text/prompt_model.hpp renders and tokenizes it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace stepmix::text {

// One request, as `generate` and `stepmix prompt` take it. Image mode iff
// num_frames == 1.
struct Cosmos3PromptRequest {
  std::string prompt;
  std::optional<std::string> negative_prompt;  // not given behaves as ""
  // Not given: 720 x 1280 for a video, 1024 x 1024 for an image (pass the
  // geometry of the run; the builder does not check multiples of 16).
  std::optional<int64_t> height, width;
  int64_t num_frames = 189;
  double fps = 24.0;                      // also what the duration sentence says
  std::optional<bool> use_system_prompt;  // not given: the model's default_use_system_prompt
  bool resolution_sentence = true;
  bool duration_sentence = true;
};

inline bool is_image_request(const Cosmos3PromptRequest& r) { return r.num_frames == 1; }
inline int64_t request_height(const Cosmos3PromptRequest& r) { return r.height.value_or(is_image_request(r) ? 1024 : 720); }
inline int64_t request_width(const Cosmos3PromptRequest& r) { return r.width.value_or(is_image_request(r) ? 1024 : 1280); }

// Python's format(value, ".Nf"): the exact binary value rounded half to even
// (189/24 = 7.875 -> "7.9", 12.25 -> "12.2", 12.5 with N = 0 -> "12").
std::string format_fixed(double value, int decimals);

// Strips every trailing ASCII '.' from `base`, then returns `sentence` if
// nothing is left, else base + ". " + sentence.
std::string append_sentence(std::string_view base, std::string_view sentence);

// The system message for an image or a video request.
std::string cosmos3_system_prompt(bool image);

struct Cosmos3Texts {
  std::string positive, negative;      // the two user messages
  std::optional<std::string> system;  // when the system prompt is on
};

// Checks the request (height, width, num_frames positive, fps in [kMinFps,
// kMaxFps]; stepmix::Error("prompt", ...) otherwise) and builds the texts.
Cosmos3Texts cosmos3_texts(const Cosmos3PromptRequest& request, bool use_system_prompt);

// A request from one JSON object with the fields of the reference prompt
// cases: prompt (required), negative_prompt (string or null), height, width,
// num_frames (integers), fps (number), use_system_prompt (boolean or null),
// resolution_sentence, duration_sentence (booleans); "id" and "note" are
// carried by the caller and ignored here; "mode", derived from num_frames,
// must agree with it when given. A missing field takes the default above;
// any other field, or a field of the wrong type, throws
// stepmix::Error("prompt", "<label>: <field>: expected ..., got ...").
Cosmos3PromptRequest cosmos3_request_from_json(const nlohmann::json& object, const std::string& label);

}  // namespace stepmix::text
