// `stepmix forward --model DIR --inputs CASE.safetensors --out OUT.safetensors`:
// one transformer call on inputs in the golden file layout, every governed
// Linear at one precision, the velocity (and optionally every intermediate
// tensor under its golden name) written as F32 safetensors.
#include <cstdio>
#include <memory>

#include "io/checkpoint.hpp"
#include "io/safetensors.hpp"
#include "model/transformer.hpp"
#include "stepmix/error.hpp"
#include "stepmix/policy.hpp"
#include "tools/commands.hpp"
#include "tools/runtime_options.hpp"

namespace stepmix::cli {
namespace {

struct ForwardOptions {
  std::string model_dir;
  std::string inputs;
  std::string out;
  std::string precision;  // empty: the checkpoint's native arithmetic
  bool dump_hidden = false;
  RuntimeOptions runtime;
};

const char* mode_name(LinearMode mode) {
  switch (mode) {
    case LinearMode::Dense:
      return "dense";
    case LinearMode::W8A16:
      return "w8a16";
    case LinearMode::W8A8:
      return "w8a8";
  }
  return "?";
}

// The one precision both towers run at; the checkpoint decides what is legal.
LinearMode resolve_precision(const ForwardOptions& opt, const Cosmos3Transformer& model, const std::string& folder) {
  if (opt.precision.empty()) return model.has_fp8() ? LinearMode::W8A8 : LinearMode::Dense;
  if (opt.precision == "dense") {
    if (model.has_fp8())
      throw Error("forward", "--precision dense: " + folder +
                                 " is a ModelOpt FP8 checkpoint (its governed Linears run w8a16 or w8a8); "
                                 "point --model at the BF16 checkpoint for dense arithmetic");
    return LinearMode::Dense;
  }
  const LinearMode mode = opt.precision == "w8a16" ? LinearMode::W8A16 : LinearMode::W8A8;
  if (!model.has_fp8())
    throw Error("forward", "--precision " + opt.precision + ": " + folder +
                               " is a BF16 checkpoint without FP8 Linears; use --precision dense or an FP8 checkpoint");
  return mode;
}

void run_forward(const ForwardOptions& opt) {
  const ModelDirectory dir = ModelDirectory::open(opt.model_dir);
  require_supported_quantization(classify_quantization(dir.config, dir.config_path), dir.config_path);
  opt.runtime.validate("forward");
  Cosmos3Transformer model = opt.runtime.load(dir);
  for (const std::string& warning : model.warnings()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  const LinearMode mode = resolve_precision(opt, model, dir.transformer_dir);

  const auto input_file = SafetensorsFile::open(opt.inputs);
  const ForwardInputs inputs = read_forward_inputs(*input_file);
  ForwardDebug debug;
  const HostTensor velocity = model.forward(inputs, mode, mode, opt.dump_hidden ? &debug : nullptr);

  std::vector<TensorToWrite> tensors{make_tensor_f32("velocity", velocity.shape, velocity.data)};
  for (const auto& [name, tensor] : debug.tensors) tensors.push_back(make_tensor_f32(name, tensor.shape, tensor.data));
  write_safetensors(opt.out, tensors);
  std::string summary = "velocity " + shape_to_string(velocity.shape) + " (" + mode_name(mode) + ") -> " + opt.out;
  if (opt.dump_hidden) summary += " with " + std::to_string(debug.tensors.size()) + " intermediate tensors";
  std::printf("%s\n", summary.c_str());
}

}  // namespace

void add_forward_command(CLI::App& app) {
  auto opt = std::make_shared<ForwardOptions>();
  CLI::App* cmd = app.add_subcommand("forward", "Run one transformer forward on inputs in the golden file layout");
  cmd->add_option("--model", opt->model_dir, "Diffusers model directory or transformer folder")->required();
  cmd->add_option("--inputs", opt->inputs,
                  "safetensors with input_ids, position_ids, vision_latent, vision_timesteps, und_len "
                  "[, vision_condition_frame_mask]")
      ->required();
  cmd->add_option("--out", opt->out, "Output safetensors (velocity F32 [1, C, T, H, W])")->required();
  cmd->add_option("--precision", opt->precision,
                  "Arithmetic of every governed Linear: dense (BF16 checkpoint), w8a16 or w8a8 (FP8 checkpoint); "
                  "default: the checkpoint's native one")
      ->check(CLI::IsMember({"dense", "w8a16", "w8a8"}));
  cmd->add_flag("--dump-hidden", opt->dump_hidden,
                "Also write rope tables, embeddings, und_hidden.{i}, gen_hidden.{i}, gen_final_norm, packed_pred");
  add_runtime_options(*cmd, opt->runtime);
  cmd->callback([opt] { run_forward(*opt); });
}

}  // namespace stepmix::cli
