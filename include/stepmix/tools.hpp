// The run-level tools behind `stepmix quantize`, `compare` and `bench`, for
// programs that want them without the CLI. Each prints its summary to `out`
// and writes its files under temporary names, renamed when complete.
//
//   stepmix::CompareOptions o;
//   o.model_dir = "fashion-fp8";
//   o.reference_dir = "fashion-bf16";
//   o.prompts_file = "prompts.txt";
//   o.seeds = 4;
//   o.out_dir = "report";
//   stepmix::compare(o, stdout);   // report/{report.json, report.md, grid.png, step_error.png}
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "stepmix/model.hpp"

namespace stepmix {

// Static "max" calibration over full sampling trajectories of a BF16 model,
// written in the ModelOpt tensorwise FP8 layout with the step policy.
struct QuantizeOptions {
  std::string model_dir;  // BF16 Diffusers directory
  std::string out_dir;    // must not exist
  std::optional<std::string> calib_prompts;  // default MODEL/calibration_prompts.txt
  int calib_seeds = 2;
  // Sampling of the calibration trajectories; steps default 8 and guidance
  // 3 unless the model or the request says. Fields quantize takes from
  // elsewhere must stay unset (an error names them): prompt and prompt_ids
  // (calib_prompts), seed and noise (seeds 0..calib_seeds-1), image,
  // scheduler and flow_shift (the model's scheduler or scheduler_config),
  // policy (calibration runs dense).
  GenerateRequest request;
  // The step policy to write (window sizes, reasoner, scope; overlap a16);
  // nullopt writes "runtime": null.
  std::optional<StepPolicy> policy = StepPolicy{};
};
void quantize(const QuantizeOptions& options, std::FILE* out);

// The same prompts and seeds under a reference and each precision mode of an
// FP8 checkpoint, measured against the reference.
struct CompareOptions {
  std::string model_dir, prompts_file, out_dir;
  std::optional<std::string> reference_dir;
  int seeds = 0;  // seeds 0..seeds-1 per prompt
  // Everything but the prompt (from prompts_file), the seed and noise (seeds
  // 0..seeds-1) and the policy (each mode's own) is used as given; those
  // must stay unset (an error names them).
  GenerateRequest request;
  std::vector<std::string> policies;  // extra modes "first-last:F,L"
  std::optional<std::string> classifier_dir;
  double diff_gain = 10;
  bool force = false;
  ModelOptions runtime;
};
void compare(const CompareOptions& options, std::FILE* out, const CancelToken* cancel = nullptr);

// Latency, throughput and memory per precision mode, and a PyTorch peer.
struct BenchOptions {
  std::string model_dir;
  std::optional<std::string> reference_dir;
  // Default prompt "a photo of a coat", seed 0; the policy is each mode's own.
  GenerateRequest request;
  int repeat = 3;
  int warmup = 1;
  bool no_peer = false;
  // Given explicitly, the peer's interpreter and script must exist (an
  // error otherwise); by default a missing one only skips the peer's row.
  // Any of the four given where no peer runs (no_peer, --device cuda) is
  // refused rather than ignored.
  std::optional<std::string> python;  // default /usr/bin/python3
  std::optional<std::string> peer_script;
  std::optional<int> peer_threads;        // default 2
  std::optional<std::string> peer_dtype;  // bf16 (default) or fp32
  std::optional<std::string> json_file;
  ModelOptions runtime;
};
void bench(const BenchOptions& options, std::FILE* out);

// A tokenizer.json on its own (`stepmix tokenize`): exactly one of text
// (encode), ids ("1,2,3": decode) and jsonl (a file of such requests, "-" for
// standard input); one JSON answer line each.
struct TokenizeOptions {
  std::string tokenizer;  // a tokenizer folder, a model folder or a tokenizer.json
  std::optional<std::string> text, ids, jsonl;
  bool skip_special_tokens = false;
};
void tokenize(const TokenizeOptions& options, std::FILE* out);

// The Cosmos3 prompt builder on its own (`stepmix prompt`): one request, or a
// JSONL file of them (the fields of the request below).
struct PromptOptions {
  std::string model;  // a model folder (text_tokenizer/) or a tokenizer folder
  std::optional<std::string> prompt, negative_prompt, jsonl;
  std::optional<int64_t> height, width;
  int64_t frames = 189;
  double fps = 24.0;
  bool no_system_prompt = false, system_prompt = false, no_resolution_sentence = false, no_duration_sentence = false;
};
void prompt(const PromptOptions& options, std::FILE* out);

// The video VAE of a model on its own (`stepmix vae decode|encode`), in the
// tensor layout of its checking files: `latent` (normalised, as generate
// writes it), `pixels` F32 [1, 3, F, H, W] in [-1, 1], `mu` (the posterior
// mean). `vae` is a vae folder or a model folder holding vae/. Each prints
// one summary line to `out`; every output is written under a temporary name
// and renamed, none when the run fails.
struct VaeRunOptions {
  std::string vae;
  ActivationDType activations = ActivationDType::F32;
  // Cuda runs the decoder or the encoder on the GPU; it needs activations =
  // BF16 (the F32 default is refused there; the CLI picks
  // default_activation_dtype(device) for you).
  Device device = Device::Cpu;
  // Refuse requests estimated to need more bytes; unset: what the system
  // has available.
  std::optional<std::size_t> max_memory;
  // After each latent frame: (done, total).
  std::function<void(int64_t done, int64_t total)> progress;
};
struct VaeDecodeOptions {
  VaeRunOptions run;
  std::string latent;  // safetensors with the F32 tensor `latent` [1, z_dim, T, h, w]
  // .safetensors (tensor `pixels`), .png (a picture, or the frames side by
  // side) or .mp4 (H.264 yuv420p at fps); frames_dir: also one PNG per frame.
  std::optional<std::string> out, frames_dir;
  double fps = kDefaultFps;
};
void vae_decode(const VaeDecodeOptions& options, std::FILE* out);
struct VaeEncodeOptions {
  VaeRunOptions run;
  // Exactly one: a safetensors file with `pixels` [1, 3, 1+4k, H, W], or a
  // PNG (width and height multiples of 16) as one frame.
  std::optional<std::string> pixels, image;
  std::string out;  // .safetensors: `latent` and `mu`
};
void vae_encode(const VaeEncodeOptions& options, std::FILE* out);

// "8G", "512M", "64K", "1048576" (binary units) as bytes; throws naming
// `option` on anything else.
std::size_t parse_memory_size(const std::string& text, const std::string& option);

// Whether `path` names a video output: its extension (any case) is .mp4, by
// the same rule that decides every output's format. Says nothing of whether
// this build writes video (outputs are refused then, with the reason).
bool is_video_output(const std::string& path);

}  // namespace stepmix
