#include "text/chat_template.hpp"

#include <openssl/evp.h>

#include <filesystem>

#include "io/json_input.hpp"
#include "stepmix/error.hpp"

namespace stepmix::text {
namespace {

// Proven to render identically on every prompt the builder can pass (the
// Qwen3-VL-Instruct one against the reference prompt cases of
// tests/data/golden/qwen3-tokenizer; the Qwen3 one against the same cases
// rendered by a Jinja implementation, bench/check-chat-templates.mjs).
struct Known {
  const char* sha256;
  const char* name;
};
constexpr Known kKnownTemplates[] = {
    {"3636d0f0bd6bef02654cdffdc447b79cb2cef8ab02cc75267345946291a489e4", "Qwen3-VL-Instruct"},
    {"87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5", "Qwen3"},
};

ChatTemplate identify(const std::string& text, const std::string& source) {
  ChatTemplate t{source, "", sha256_hex(text)};
  const auto name = known_chat_template(t.sha256);
  if (!name)
    throw Error("prompt", source + ": unknown chat template (sha256 " + t.sha256 +
                              "); stepmix renders only the Qwen3-VL-Instruct and Qwen3 ChatML templates it has "
                              "verified (see docs/text.md)");
  t.name = *name;
  return t;
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1)
    throw Error("prompt", "SHA-256 failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

std::optional<std::string> known_chat_template(const std::string& sha256) {
  for (const Known& k : kKnownTemplates)
    if (sha256 == k.sha256) return std::string(k.name);
  return std::nullopt;
}

std::optional<ChatTemplate> find_chat_template(const std::string& tokenizer_dir, const nlohmann::json& tokenizer_config,
                                               const std::string& tokenizer_config_path) {
  const std::string jinja = (std::filesystem::path(tokenizer_dir) / "chat_template.jinja").string();
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(jinja, ec)) || std::filesystem::exists(jinja, ec))
    return identify(read_small_file(jinja, "prompt"), jinja);
  if (tokenizer_config.is_object() && tokenizer_config.contains("chat_template")) {
    const auto& t = tokenizer_config["chat_template"];
    const std::string source = tokenizer_config_path + ": chat_template";
    if (!t.is_string())
      throw Error("prompt", source + ": expected a string (named template lists are not supported)");
    return identify(t.get<std::string>(), source);
  }
  return std::nullopt;
}

std::string render_chatml(const std::optional<std::string>& system, std::string_view user) {
  std::string out;
  if (system) out += "<|im_start|>system\n" + *system + "<|im_end|>\n";
  out += "<|im_start|>user\n";
  out += user;
  out += "<|im_end|>\n<|im_start|>assistant\n";
  return out;
}

}  // namespace stepmix::text
