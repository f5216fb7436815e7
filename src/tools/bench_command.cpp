// `stepmix bench`: latency, throughput and memory per precision mode, and a
// PyTorch eager peer (stepmix::bench).
#include "stepmix/tools.hpp"
#include "commands.hpp"
#include "options.hpp"

namespace stepmix::cli {
namespace {

struct BenchCommand {
  BenchOptions options;
  RequestOptions request;
  RuntimeOptions runtime;
};

void run_bench(BenchCommand& c) {
  c.options.runtime = c.runtime.model_options();
  c.options.request = c.request.to_request("bench");
  bench(c.options, stdout);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto c = std::make_shared<BenchCommand>();
  BenchOptions& o = c->options;
  CLI::App* cmd =
      app.add_subcommand("bench", "Latency, throughput and memory per precision mode, and a PyTorch eager peer");
  cmd->add_option("-m,--model", o.model_dir, "Model directory (FP8: w8a16, w8a8, mixed; BF16: bf16)")->required();
  cmd->add_option("--reference", o.reference_dir, "BF16 original of an FP8 --model: adds the bf16 row");
  add_request_options(*cmd, c->request, kPromptText | kNegativePrompt | kGeometry | kSampling | kSchedulerConfig);
  cmd->add_option("--repeat", o.repeat, "Timed generations per mode")->default_val(3)->check(non_empty());
  cmd->add_option("--warmup", o.warmup, "Untimed generations per mode first")->default_val(1)->check(non_empty());
  cmd->add_flag("--no-peer", o.no_peer, "Skip the PyTorch peer");
  cmd->add_option("--python", o.python, "Python for the peer (default: /usr/bin/python3)");
  cmd->add_option("--peer-script", o.peer_script, "Peer script (default: bench/peer_generate.py)");
  cmd->add_option("--peer-threads", o.peer_threads, "torch threads of the peer (default 2)")->check(non_empty());
  cmd->add_option("--peer-dtype", o.peer_dtype, "Peer arithmetic: bf16 (autocast, the default) or fp32")
      ->check(CLI::IsMember({"bf16", "fp32"}));
  cmd->add_option("--json", o.json_file, "Also write the results as JSON");
  add_runtime_options(*cmd, c->runtime);
  cmd->callback([c] { run_bench(*c); });
}

}  // namespace stepmix::cli
