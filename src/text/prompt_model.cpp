#include "text/prompt_model.hpp"

#include <filesystem>

#include "io/checkpoint.hpp"
#include "io/json_input.hpp"
#include "stepmix/error.hpp"

namespace stepmix::text {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kVisionStart = "<|vision_start|>";
// Only for plain models without tokenizer_config.json (the embedded model's
// tests write bare tokenizer.json files): the usual names of the end token.
constexpr const char* kEosNames[] = {"<|im_end|>", "<|endoftext|>", "</s>", "<eos>", "[EOS]"};

bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

// eos_token / vision_start_token: a string or an AddedToken object.
std::optional<std::string> token_name(const json& config, const char* key, const std::string& path) {
  if (!config.is_object() || !config.contains(key) || config[key].is_null()) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  throw Error("prompt", path + ": " + key + ": expected a token string or {\"content\": ...}");
}

}  // namespace

TokenizerFolder locate_tokenizer(const std::string& path) {
  const fs::path p(path);
  if (!present(p)) throw Error("tokenizer", path + ": no such file or directory");
  TokenizerFolder f;
  if (!fs::is_directory(p)) {
    f.tokenizer_json = p.string();
    f.dir = p.parent_path().empty() ? "." : p.parent_path().string();
    return f;
  }
  for (const char* sub : {"text_tokenizer", "tokenizer"}) {
    if (present(p / sub / "tokenizer.json")) {
      f.tokenizer_json = (p / sub / "tokenizer.json").string();
      f.dir = (p / sub).string();
      f.model_root = p.string();
      return f;
    }
  }
  if (present(p / "tokenizer.json")) {
    f.tokenizer_json = (p / "tokenizer.json").string();
    f.dir = p.string();
    return f;
  }
  throw Error("tokenizer", path + ": no text_tokenizer/tokenizer.json, tokenizer/tokenizer.json or tokenizer.json");
}

PromptModel PromptModel::from_parts(Tokenizer tokenizer, const json& config, const std::string& config_path,
                                    std::optional<ChatTemplate> chat_template, bool default_use_system_prompt) {
  PromptModel m(std::move(tokenizer));
  m.chat_template_ = std::move(chat_template);
  m.default_use_system_prompt_ = default_use_system_prompt;
  const std::string& label = m.tokenizer_.label();
  if (m.chat_template_) {
    m.style_ = PromptStyle::cosmos3_chat;
  } else if (m.tokenizer_.model_kind() == ModelKind::bpe) {
    throw Error("prompt", label + ": a byte-level BPE tokenizer without a chat template (expected chat_template.jinja or "
                                  "tokenizer_config.json chat_template beside it): the Cosmos3 prompt cannot be built");
  }

  if (const auto eos = token_name(config, "eos_token", config_path)) {
    const auto id = m.tokenizer_.token_id(*eos);
    if (!id) throw Error("prompt", config_path + ": eos_token: \"" + *eos + "\" is not a token of " + label);
    m.eos_id_ = *id;
  } else if (m.style_ == PromptStyle::cosmos3_chat) {
    throw Error("prompt", (config.is_null() ? label + ": no tokenizer_config.json beside it" : config_path) +
                              ": eos_token: required (its id ends the understanding prefix)");
  } else {
    for (const char* name : kEosNames)
      if (const auto id = m.tokenizer_.token_id(name)) {
        m.eos_id_ = *id;
        break;
      }
    if (m.eos_id_ < 0)
      throw Error("tokenizer", label + ": no end-of-text token (expected one of <|im_end|>, <|endoftext|>, </s>, <eos>, [EOS])");
  }
  const std::string vision = token_name(config, "vision_start_token", config_path).value_or(kVisionStart);
  const auto vision_id = m.tokenizer_.token_id(vision);
  if (!vision_id) throw Error("tokenizer", label + ": no " + vision + " token");
  m.vision_start_id_ = *vision_id;
  return m;
}

PromptModel PromptModel::open(const std::string& path) {
  const TokenizerFolder folder = locate_tokenizer(path);
  Tokenizer tokenizer = Tokenizer::from_file(folder.tokenizer_json);
  const std::string config_path = (fs::path(folder.dir) / "tokenizer_config.json").string();
  json config;
  if (present(config_path)) {
    config = read_json_file(config_path, "prompt");
    if (!config.is_object()) throw Error("prompt", config_path + ": expected a JSON object");
    // With it on, special-token text typed in a prompt would be split into
    // ordinary tokens; stepmix (as the Cosmos3 tokenizer ships) matches it.
    if (const auto it = config.find("split_special_tokens"); it != config.end() && !it->is_null() && *it != false)
      throw Error("prompt", config_path + ": split_special_tokens: expected false or absent (special-token text in a "
                                          "prompt is matched as the token), got " + it->dump());
  }
  bool default_system = true;
  if (folder.model_root) {
    const std::string index = (fs::path(*folder.model_root) / "model_index.json").string();
    if (present(index)) {
      const json doc = read_json_file(index, "prompt");
      if (doc.is_object() && doc.contains("default_use_system_prompt")) {
        if (!doc["default_use_system_prompt"].is_boolean())
          throw Error("prompt", index + ": default_use_system_prompt: expected true or false, got " +
                                    doc["default_use_system_prompt"].dump());
        default_system = doc["default_use_system_prompt"].get<bool>();
      }
    }
  }
  PromptModel m = from_parts(std::move(tokenizer), config, config_path, find_chat_template(folder.dir, config, config_path),
                             default_system);
  m.folder_ = folder;
  return m;
}

std::vector<int64_t> PromptModel::ids_of(const std::string& rendered, const char* which) const {
  std::vector<int64_t> ids = tokenizer_.encode(rendered);
  ids.push_back(eos_id_);
  ids.push_back(vision_start_id_);
  if (ids.size() > kMaxPromptIds)
    throw Error("prompt", std::string(which) + " prompt: " + std::to_string(ids.size()) + " token ids, more than the " +
                              std::to_string(kMaxPromptIds) + " a Cosmos3 transformer takes; shorten the prompt");
  return ids;
}

Cosmos3Prompt PromptModel::build(const Cosmos3PromptRequest& request) const {
  Cosmos3Prompt p;
  if (style_ == PromptStyle::plain) {
    p.positive_text = p.positive_rendered = request.prompt;
    p.negative_text = p.negative_rendered = request.negative_prompt.value_or("");
  } else {
    Cosmos3Texts t = cosmos3_texts(request, request.use_system_prompt.value_or(default_use_system_prompt_));
    p.positive_rendered = render_chatml(t.system, t.positive);
    p.negative_rendered = render_chatml(t.system, t.negative);
    p.positive_text = std::move(t.positive);
    p.negative_text = std::move(t.negative);
    p.system_prompt = std::move(t.system);
  }
  p.positive_ids = ids_of(p.positive_rendered, "positive");
  p.negative_ids = ids_of(p.negative_rendered, "negative");
  return p;
}

std::vector<int64_t> PromptModel::understanding_prefix(const std::string& text,
                                                      std::vector<std::string>* unknown_words) const {
  if (style_ == PromptStyle::cosmos3_chat)
    throw Error("prompt", tokenizer_.label() + ": a Cosmos3 chat-template tokenizer: its prompts are built with the "
                                               "Cosmos3 prompt builder (sentences, system prompt, template), not encoded bare");
  std::vector<int64_t> ids = tokenizer_.encode(text, unknown_words);
  ids.push_back(eos_id_);
  ids.push_back(vision_start_id_);
  return ids;
}

}  // namespace stepmix::text
