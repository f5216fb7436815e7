// The chat template of a tokenizer folder, rendered natively.
//
// stepmix does not run Jinja (no C++ implementation is packaged in Debian).
// It renders ChatML itself, and accepts a shipped template only when its
// SHA-256 is one of the templates known to render, for what the prompt
// builder passes (an optional system message and one user message, both
// plain strings, add_generation_prompt = true, no tools, add_vision_id and
// enable_thinking unset), exactly
//
//   <|im_start|>system\n{system}<|im_end|>\n      (only with a system message)
//   <|im_start|>user\n{user}<|im_end|>\n
//   <|im_start|>assistant\n
//
// with no default system message when none is given. Known: the
// Qwen3-VL-Instruct template Cosmos3 checkpoints ship, and the Qwen3
// text-model template (its thinking branch only acts on enable_thinking
// = false or assistant turns). Any other template is an error naming the
// file, never silently replaced (docs/text.md says how one is added).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace stepmix::text {

struct ChatTemplate {
  std::string source;  // "<dir>/chat_template.jinja" or "<dir>/tokenizer_config.json: chat_template"
  std::string name;    // "Qwen3-VL-Instruct", "Qwen3"
  std::string sha256;  // of the template text, lower-case hex
};

// Lower-case hex SHA-256 (OpenSSL).
std::string sha256_hex(std::string_view bytes);

// The known template with this fingerprint, if any.
std::optional<std::string> known_chat_template(const std::string& sha256);

// The template `tokenizer_dir` ships: chat_template.jinja, which wins as in
// `transformers`, else tokenizer_config.json's "chat_template" string
// (`tokenizer_config` may be null when there is no such file). nullopt when
// there is neither. Throws stepmix::Error("prompt", ...) for an unknown
// template or a chat_template that is not a string.
std::optional<ChatTemplate> find_chat_template(const std::string& tokenizer_dir, const nlohmann::json& tokenizer_config,
                                               const std::string& tokenizer_config_path);

// The rendering above.
std::string render_chatml(const std::optional<std::string>& system, std::string_view user);

}  // namespace stepmix::text
