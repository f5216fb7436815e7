// Prompt -> the understanding ids a Cosmos3 transformer takes, exactly as
// the Diffusers pipeline builds them: augment the prompt (cosmos3_prompt.hpp),
// render [system?, user] with the checkpoint's chat template (generation
// prompt on, no vision ids), encode the rendered text (control-token strings
// become control tokens), then append the tokenizer's eos id and the id of
// <|vision_start|>, both read from the files. More than kMaxPromptIds ids is
// an error.
//
// How `generate`, `bench` and `compare` use it:
//
//   const text::PromptModel model = text::PromptModel::open(model_dir);
//   text::Cosmos3PromptRequest request;          // one per run
//   request.prompt = opt.prompt;                 // --prompt
//   request.negative_prompt = opt.negative;      // --negative-prompt
//   request.height = H; request.width = W;       // pixel geometry of the run
//   request.num_frames = frames;                 // 1 = image
//   request.fps = opt.fps;                       // --fps (default 24): the duration
//                                                // sentence, and the same value
//                                                // feeds the fps-modulated positions
//   if (opt.no_system_prompt) request.use_system_prompt = false;
//   const text::Cosmos3Prompt p = model.build(request);
//   // p.positive_ids / p.negative_ids: the conditional / unconditional
//   // understanding prefixes (L_c = positive_ids.size(), L_u = ...);
//   // p.positive_rendered.size() / p.negative_rendered.size(): the rendered
//   // texts' lengths in bytes for --json and the PNG metadata.
//
// model.style() tells the two kinds of model apart: cosmos3_chat (a chat
// template ships with the tokenizer: Cosmos3 checkpoints, byte-level BPE) or
// plain (stepmix's own WordLevel models, trained on bare prompts: build()
// encodes the prompt as given and appends the two ids, no sentences, no
// template). --prompt-ids bypasses all of this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "text/chat_template.hpp"
#include "text/cosmos3_prompt.hpp"
#include "text/tokenizer.hpp"

namespace stepmix::text {

// The transformer's text-length limit (also vLLM-Omni's and TensorRT-LLM's).
inline constexpr std::size_t kMaxPromptIds = 4096;

// Where a folder keeps its tokenizer.
struct TokenizerFolder {
  std::string tokenizer_json;             // .../tokenizer.json
  std::string dir;                        // the folder holding it
  std::optional<std::string> model_root;  // the model folder, when `path` was one
};
// `path`: a model folder (text_tokenizer/tokenizer.json, else
// tokenizer/tokenizer.json), a tokenizer folder (tokenizer.json), or a
// tokenizer.json itself. Throws stepmix::Error("tokenizer", ...) otherwise.
TokenizerFolder locate_tokenizer(const std::string& path);

enum class PromptStyle { plain, cosmos3_chat };

struct Cosmos3Prompt {
  std::string positive_text, negative_text;          // user messages after augmentation
  std::string positive_rendered, negative_rendered;  // chat-template output
  std::vector<int64_t> positive_ids, negative_ids;   // encode(rendered) + eos + <|vision_start|>
  std::optional<std::string> system_prompt;
};

class PromptModel {
 public:
  // Loads tokenizer.json, tokenizer_config.json (eos_token, chat_template),
  // chat_template.jinja and, for a model folder, model_index.json
  // (default_use_system_prompt). Throws stepmix::Error naming the file.
  static PromptModel open(const std::string& path);

  PromptStyle style() const { return style_; }
  bool is_cosmos3_chat() const { return style_ == PromptStyle::cosmos3_chat; }

  // Both ids lists of a request; stepmix::Error("prompt", ...) for an invalid
  // request or more than kMaxPromptIds ids (the message gives the count).
  Cosmos3Prompt build(const Cosmos3PromptRequest& request) const;

  // encode(text) + eos + <|vision_start|>, no augmentation, no template, no
  // limit: the understanding prefix of a plain model. Throws for a
  // cosmos3_chat model, whose prompts need build().
  // With `unknown_words`, the words a WordLevel vocabulary maps to unk.
  std::vector<int64_t> understanding_prefix(const std::string& text,
                                            std::vector<std::string>* unknown_words = nullptr) const;

  const Tokenizer& tokenizer() const { return tokenizer_; }
  int64_t eos_id() const { return eos_id_; }
  int64_t vision_start_id() const { return vision_start_id_; }
  bool default_use_system_prompt() const { return default_use_system_prompt_; }
  const std::optional<ChatTemplate>& chat_template() const { return chat_template_; }
  const TokenizerFolder& folder() const { return folder_; }

  // For tests and tools that hold the parts already. `tokenizer_config` may
  // be null (no tokenizer_config.json); eos then falls back to the
  // conventional names (<|im_end|>, <|endoftext|>, </s>, <eos>, [EOS]) for a
  // plain model, while a chat model needs tokenizer_config.json's eos_token.
  static PromptModel from_parts(Tokenizer tokenizer, const nlohmann::json& tokenizer_config,
                                const std::string& tokenizer_config_path, std::optional<ChatTemplate> chat_template,
                                bool default_use_system_prompt);

 private:
  PromptModel(Tokenizer t) : tokenizer_(std::move(t)) {}
  std::vector<int64_t> ids_of(const std::string& rendered, const char* which) const;

  Tokenizer tokenizer_;
  TokenizerFolder folder_;
  PromptStyle style_ = PromptStyle::plain;
  std::optional<ChatTemplate> chat_template_;
  int64_t eos_id_ = -1, vision_start_id_ = -1;
  bool default_use_system_prompt_ = true;
};

}  // namespace stepmix::text
