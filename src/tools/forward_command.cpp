// `stepmix forward --model DIR --inputs CASE.safetensors --out OUT.safetensors`:
// one transformer call on inputs in the golden file layout, every governed
// Linear at one precision, the velocity (and optionally every intermediate
// tensor under its golden name) written as F32 safetensors.
#include <cstdio>

#include "commands.hpp"
#include "options.hpp"

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

void run_forward(const ForwardOptions& opt) {
  const ModelOptions model_options = opt.runtime.model_options();
  std::optional<Precision> precision;
  if (opt.precision == "dense") precision = Precision::BF16;
  if (opt.precision == "w8a16") precision = Precision::W8A16;
  if (opt.precision == "w8a8") precision = Precision::W8A8;
  // The output is checked before anything runs: never one of the inputs.
  TensorsOutput output(opt.out, {{"--inputs", opt.inputs}, {"--model", opt.model_dir}});
  Model model = Model::open(opt.model_dir, model_options);
  for (const std::string& warning : model.info().warnings) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  if (!precision) precision = model.info().has_fp8 ? Precision::W8A8 : Precision::BF16;
  const std::vector<NamedTensor> tensors = model.forward_file(opt.inputs, precision, opt.dump_hidden);
  output.write(tensors);
  std::string summary = "velocity " + shape_string(tensors.front().shape) + " (" +
                        (*precision == Precision::BF16 ? "dense" : std::string(precision_json_name(*precision))) +
                        ") -> " + opt.out;
  if (opt.dump_hidden) summary += " with " + std::to_string(tensors.size() - 1) + " intermediate tensors";
  std::printf("%s\n", summary.c_str());
}

}  // namespace

void add_forward_command(CLI::App& app) {
  auto opt = std::make_shared<ForwardOptions>();
  CLI::App* cmd = app.add_subcommand("forward", "Run one transformer forward on inputs in the golden file layout");
  cmd->add_option("-m,--model", opt->model_dir, "Diffusers model directory or transformer folder")->required();
  cmd->add_option("--inputs", opt->inputs,
                  "safetensors with input_ids, position_ids, vision_latent, vision_timesteps, und_len "
                  "[, vision_condition_frame_mask]")
      ->required();
  cmd->add_option("-o,--out", opt->out, "Output safetensors (velocity F32 [1, C, T, H, W])")->required();
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
