// `stepmix bench`: latency, throughput and memory of each precision mode of a
// checkpoint (BF16 dense, W8A16 every step, W8A8 every step, the mixed
// schedule), and of the same model in a PyTorch eager peer
// (bench/peer_generate.py, the training code's model, bf16, 2 threads).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/thread_pool.hpp"
#include "io/checkpoint.hpp"
#include "io/safetensors.hpp"
#include "model/transformer.hpp"
#include "pipeline/denoise.hpp"
#include "pipeline/metrics.hpp"
#include "pipeline/model_setup.hpp"
#include "pipeline/noise.hpp"
#include "tools/commands.hpp"
#include "tools/runtime_options.hpp"

namespace stepmix::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string model_dir;
  std::optional<std::string> reference_dir;
  std::optional<int> steps;
  std::optional<double> guidance;
  std::optional<std::string> prompt, prompt_ids, negative_prompt_ids;
  std::optional<std::string> latent_shape;
  std::optional<int> height, width, frames;
  std::optional<std::string> scheduler_config;
  int repeat = 3;
  int warmup = 1;
  bool no_peer = false;
  std::string python = "/usr/bin/python3";
  std::optional<std::string> peer_script;
  int peer_threads = 2;
  std::string peer_dtype = "bf16";
  std::optional<std::string> json_file;
  RuntimeOptions runtime;
};

// Wall time of each loop iteration: every transformer pass of the step (two
// with CFG) plus the scheduler update, which costs microseconds.
class StepTimer : public DenoiseObserver {
 public:
  void on_step_begin(int, int, Precision generation, Precision) override {
    begin_ = Clock::now();
    precision_ = generation;
  }
  void on_step_end(int, const std::vector<float>&, const std::vector<float>*, const std::vector<float>&,
                   const std::vector<float>&) override {
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - begin_).count();
    step_ms.push_back(ms);
    by_precision[std::string(precision_trace_token(precision_))].push_back(ms);
  }
  std::vector<double> step_ms;
  std::map<std::string, std::vector<double>> by_precision;

 private:
  Clock::time_point begin_;
  Precision precision_ = Precision::BF16;
};

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const std::size_t lo = std::size_t(pos), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

json spread(const std::vector<double>& v) {
  return {{"median", median(v)},   {"p10", quantile(v, 0.1)}, {"p90", quantile(v, 0.9)},
          {"min", quantile(v, 0)}, {"max", quantile(v, 1)},   {"samples", v.size()}};
}

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t(u.ru_maxrss) * 1024;  // Linux reports KiB
}

// Resident bytes of this process's mappings of files under `folder`
// (/proc/self/smaps): the weight pages actually in memory, not the file size.
int64_t mapped_resident_bytes(const std::string& folder) {
  std::error_code ec;
  const std::string prefix = fs::weakly_canonical(folder, ec).string() + "/";
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  int64_t kib = 0;
  while (std::getline(smaps, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < line.find(' ')) {
      const auto slash = line.find('/');
      inside = slash != std::string::npos && line.compare(slash, prefix.size(), prefix) == 0;
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      kib += std::stoll(line.substr(4));
    }
  }
  return kib * 1024;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string join_ids(const std::vector<int64_t>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

// bench/peer_generate.py next to the working directory or the binary.
std::optional<std::string> find_peer_script(const BenchOptions& opt) {
  if (opt.peer_script) return opt.peer_script;
  std::vector<fs::path> candidates{fs::current_path() / "bench/peer_generate.py"};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path())
      candidates.push_back(p / "bench/peer_generate.py");
  for (const fs::path& c : candidates)
    if (fs::is_regular_file(c)) return c.string();
  return std::nullopt;
}

struct ModeToRun {
  std::string name;
  Cosmos3Transformer* transformer;
  std::string transformer_dir;
  StepPlan plan;
};

void run_bench(const BenchOptions& opt) {
  if (opt.repeat < 1) throw Error("bench", "--repeat: expected an integer >= 1, got " + std::to_string(opt.repeat));
  if (opt.warmup < 0) throw Error("bench", "--warmup: expected an integer >= 0, got " + std::to_string(opt.warmup));
  if (opt.steps && *opt.steps < 1)
    throw Error("bench", "--steps: expected an integer >= 1, got " + std::to_string(*opt.steps));
  if (opt.prompt && opt.prompt_ids) throw Error("bench", "give --prompt or --prompt-ids, not both");
  if (opt.peer_threads < 1) throw Error("bench", "--peer-threads: expected an integer >= 1");
  opt.runtime.validate("bench");

  const ModelDirectory dir = ModelDirectory::open(opt.model_dir);
  const ModelDefaults defaults = read_model_defaults(dir);
  const int steps = opt.steps ? *opt.steps : defaults.steps.value_or(35);
  const double guidance = opt.guidance ? *opt.guidance : defaults.guidance.value_or(6.0);
  Cosmos3Transformer model = opt.runtime.load(dir);
  const int64_t rss_after_load = peak_rss_bytes();

  std::optional<ModelDirectory> ref_dir;
  std::optional<Cosmos3Transformer> ref_model;
  std::vector<ModeToRun> modes;
  auto plan_for = [&](const ModelDirectory& d, Cosmos3Transformer& t, const PolicyOverrides& o) {
    const ResolvedPolicy p = resolve_policy(d.config, d.config_path, o);
    check_governed_counts(p, t.governed_counts(), d.transformer_dir);
    return plan_steps(p, t.has_fp8(), steps);
  };
  if (opt.reference_dir) {
    ref_dir = ModelDirectory::open(*opt.reference_dir);
    ref_model.emplace(opt.runtime.load(*ref_dir));
    if (ref_model->has_fp8()) throw Error("bench", "--reference " + *opt.reference_dir + " is not a BF16 checkpoint");
    modes.push_back({"bf16", &*ref_model, ref_dir->transformer_dir, plan_for(*ref_dir, *ref_model, {})});
  }
  if (!model.has_fp8()) {
    if (opt.reference_dir) throw Error("bench", "--reference is for an FP8 --model; this one is BF16 already");
    modes.push_back({"bf16", &model, dir.transformer_dir, plan_for(dir, model, {})});
  } else {
    modes.push_back({"w8a16", &model, dir.transformer_dir,
                     plan_for(dir, model, {MixedPrecisionMode::Fp8, steps, 0, TowerMode::A16, std::nullopt})});
    modes.push_back(
        {"w8a8", &model, dir.transformer_dir, plan_for(dir, model, {MixedPrecisionMode::None, {}, {}, {}, {}})});
    const ResolvedPolicy own = resolve_policy(dir.config, dir.config_path, {});
    modes.push_back(
        {own.enabled ? "mixed" : "mixed (forced 3/3)", &model, dir.transformer_dir,
         plan_for(dir, model,
                  own.enabled ? PolicyOverrides{} : PolicyOverrides{MixedPrecisionMode::Fp8, {}, {}, {}, {}})});
  }

  PromptEncoder encoder(dir);
  DenoiseRequest request;
  request.cond_ids = opt.prompt_ids ? parse_id_list(*opt.prompt_ids, "--prompt-ids")
                                    : encoder.encode(opt.prompt.value_or("a photo of a coat"));
  if (guidance != 1.0)
    request.uncond_ids =
        opt.negative_prompt_ids ? parse_id_list(*opt.negative_prompt_ids, "--negative-prompt-ids") : encoder.encode("");
  request.latent_shape = latent_shape_for({opt.latent_shape, opt.height, opt.width, opt.frames}, dir,
                                          model.config().latent_channel, defaults);
  const auto [C, T, H, W] = request.latent_shape;
  request.guidance = guidance;
  request.noise = NormalGenerator(0).normals(std::size_t(C * T * H * W));
  const sched::SchedulerConfig sched_config = scheduler_config_for({opt.scheduler_config, {}, {}}, dir, T > 1);
  const SequenceSettings settings = read_sequence_settings(dir.config, dir.config_path);
  const int threads = ThreadPool::global().size();

  std::printf("bench: %s  steps %d  guidance %g  latent %lld,%lld,%lld,%lld  repeat %d (+%d warm-up)  threads %d\n",
              opt.model_dir.c_str(), steps, guidance, (long long)C, (long long)T, (long long)H, (long long)W,
              opt.repeat, opt.warmup, threads);
  // Timings next to other jobs are not the machine's: say so rather than hide it.
  double load[1] = {0};
  const bool have_load = getloadavg(load, 1) == 1;
  const unsigned cores = std::thread::hardware_concurrency();
  if (have_load && cores && load[0] > cores)
    std::printf("warning: load average %.1f on %u hardware threads: other jobs share the CPU; timings are contended\n",
                load[0], cores);
  std::printf("%-20s %-26s %24s %9s %8s %9s %9s %10s\n", "mode", "trace", "ms/step median [p10,p90]", "e2e s",
              "steps/s", "images/s", "peak MiB", "weights MiB");
  json report = {{"model", opt.model_dir},
                 {"reference", opt.reference_dir ? json(*opt.reference_dir) : json()},
                 {"steps", steps},
                 {"guidance", guidance},
                 {"latent_shape", request.latent_shape},
                 {"repeat", opt.repeat},
                 {"warmup", opt.warmup},
                 {"threads", threads},
                 {"activations", opt.runtime.activations},
                 {"weight_cache", opt.runtime.weight_cache},
                 {"hardware_threads", std::thread::hardware_concurrency()},
                 {"load_average_1m", have_load ? json(load[0]) : json()},
                 {"peak_rss_bytes_after_load", rss_after_load}};
  json modes_json = json::array();
  std::vector<std::pair<std::string, double>> e2e_median;  // in table order
  for (const ModeToRun& m : modes) {
    StepTimer timer;
    std::vector<double> e2e;
    std::string trace;
    for (int r = 0; r < opt.warmup + opt.repeat; ++r) {
      StepController controller(m.plan);
      auto scheduler = sched::make_scheduler(sched_config);
      StepTimer warm;
      const auto t0 = Clock::now();
      const DenoiseResult result =
          denoise(*m.transformer, *scheduler, controller, request, settings, r < opt.warmup ? &warm : &timer);
      const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      trace = trace_string(result.trace);
      if (r >= opt.warmup) e2e.push_back(seconds);
    }
    int64_t cache_bytes = 0;
    m.transformer->for_each_governed_linear([&](Linear& l) { cache_bytes += int64_t(l.resident_bytes()); });
    json by_precision = json::object();
    for (const auto& [token, v] : timer.by_precision) by_precision[token] = median(v);
    const double e2e_med = median(e2e);
    e2e_median.emplace_back(m.name, e2e_med);
    const int64_t weights = mapped_resident_bytes(m.transformer_dir) + cache_bytes;
    json j = {{"name", m.name},
              {"trace", trace},
              {"step_ms", spread(timer.step_ms)},
              {"step_ms_median_by_precision", by_precision},
              {"end_to_end_s", spread(e2e)},
              {"steps_per_s", steps / e2e_med},
              {"images_per_s", 1.0 / e2e_med},
              {"peak_rss_bytes", peak_rss_bytes()},
              {"weight_bytes_resident", weights},
              {"weight_cache_bytes", cache_bytes}};
    const json& s = j["step_ms"];
    char ms[64];
    std::snprintf(ms, sizeof ms, "%.2f [%.2f, %.2f]", s["median"].get<double>(), s["p10"].get<double>(),
                  s["p90"].get<double>());
    std::printf("%-20s %-26s %24s %9.4g %8.4g %9.4g %9.1f %10.2f\n", m.name.c_str(), trace.c_str(), ms, e2e_med,
                steps / e2e_med, 1.0 / e2e_med, double(peak_rss_bytes()) / (1 << 20), double(weights) / (1 << 20));
    modes_json.push_back(j);
  }
  report["modes"] = modes_json;

  // The PyTorch eager peer on the same checkpoint, prompt, noise shape and timesteps.
  json peer;
  const std::optional<std::string> script = opt.no_peer ? std::nullopt : find_peer_script(opt);
  if (opt.no_peer) {
    peer = {{"error", "skipped (--no-peer)"}};
  } else if (!script) {
    peer = {{"error", "bench/peer_generate.py not found (run from the repository root or pass --peer-script)"}};
  } else if (access(opt.python.c_str(), X_OK) != 0) {
    peer = {{"error", opt.python + " not found"}};
  } else {
    auto scheduler = sched::make_scheduler(sched_config);
    scheduler->set_timesteps(steps);
    std::ostringstream ts, sig;
    ts.precision(17);
    sig.precision(9);
    for (std::size_t i = 0; i < scheduler->timesteps().size(); ++i) ts << (i ? "," : "") << scheduler->timesteps()[i];
    for (std::size_t i = 0; i < scheduler->sigmas().size(); ++i) sig << (i ? "," : "") << scheduler->sigmas()[i];
    const std::string cmd =
        shell_quote(opt.python) + " " + shell_quote(*script) + " --model " +
        shell_quote(opt.reference_dir.value_or(opt.model_dir)) + " --cond-ids " + join_ids(request.cond_ids) +
        (request.uncond_ids.empty() ? "" : " --uncond-ids " + join_ids(request.uncond_ids)) + " --latent-shape " +
        std::to_string(C) + "," + std::to_string(T) + "," + std::to_string(H) + "," + std::to_string(W) +
        " --guidance " + std::to_string(guidance) + " --timesteps " + ts.str() + " --sigmas " + sig.str() +
        " --repeat " + std::to_string(opt.repeat) + " --warmup " + std::to_string(opt.warmup) + " --threads " +
        std::to_string(opt.peer_threads) + " --dtype " + shell_quote(opt.peer_dtype) + " 2>&1";
    std::fflush(stdout);
    std::string output, last_json;
    if (FILE* pipe = popen(cmd.c_str(), "r")) {
      std::array<char, 4096> buf;
      while (fgets(buf.data(), int(buf.size()), pipe)) output += buf.data();
      const int status = pclose(pipe);
      std::istringstream lines(output);
      std::string line;
      std::string last_line;
      while (std::getline(lines, line)) {
        if (!line.empty() && line[0] == '{') last_json = line;
        if (!line.empty()) last_line = line;
      }
      try {
        peer = last_json.empty() ? json{{"error", "no result: " + last_line}} : json::parse(last_json);
      } catch (const json::exception&) {
        peer = {{"error", "unreadable result: " + last_json}};
      }
      if (status != 0 && !peer.contains("error")) peer["error"] = "exit status " + std::to_string(status);
    } else {
      peer = {{"error", "cannot start " + opt.python}};
    }
  }
  if (peer.contains("error")) {
    std::printf("peer: not run: %s\n", peer["error"].get<std::string>().c_str());
  } else {
    const double peer_e2e = peer["end_to_end_s"]["median"].get<double>();
    const json& s = peer["step_ms"];
    char ms[64];
    std::snprintf(ms, sizeof ms, "%.2f [%.2f, %.2f]", s["median"].get<double>(), s["p10"].get<double>(),
                  s["p90"].get<double>());
    const std::string name = "pytorch " + peer.value("dtype", std::string("?"));
    std::printf("%-20s %-26s %24s %9.4g %8.4g %9.4g %9.1f %10s\n", name.c_str(),
                ("eager, " + std::to_string(peer.value("threads", 0)) + " threads").c_str(), ms, peer_e2e,
                steps / peer_e2e, 1.0 / peer_e2e, double(peer.value("peak_rss_bytes", int64_t(0))) / (1 << 20), "-");
    std::string libs;
    for (const json& lib : peer.value("blas", json::array()))
      libs += " " + fs::path(lib.get<std::string>()).filename().string();
    std::printf("peer: torch %s, %s, weights: %s, CFG batched: %s, libraries:%s\n",
                peer.value("torch", std::string("?")).c_str(), peer.value("dtype", std::string("?")).c_str(),
                peer.value("weights", std::string("?")).c_str(), peer.value("cfg_batched", false) ? "yes" : "no",
                libs.empty() ? " ?" : libs.c_str());
    json ratios = json::object();
    std::printf("speed-up over the peer (end-to-end):");
    for (const auto& [name_, e2e] : e2e_median) {
      ratios[name_] = peer_e2e / e2e;
      std::printf(" %s %.2fx", name_.c_str(), peer_e2e / e2e);
    }
    std::printf("\n");
    report["speedup_vs_peer"] = ratios;
  }
  report["peer"] = peer;
  if (opt.json_file) {
    write_file_atomic(*opt.json_file, report.dump(2) + "\n");
    std::printf("json: %s\n", opt.json_file->c_str());
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto opt = std::make_shared<BenchOptions>();
  CLI::App* cmd =
      app.add_subcommand("bench", "Latency, throughput and memory per precision mode, and a PyTorch eager peer");
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("--model", opt->model_dir, "Model directory (FP8: w8a16, w8a8, mixed; BF16: bf16)")->required();
  cmd->add_option("--reference", opt->reference_dir, "BF16 original of an FP8 --model: adds the bf16 row");
  cmd->add_option("--steps", opt->steps, "Denoising steps (default: the model's, else 35)");
  cmd->add_option("--guidance", opt->guidance, "Classifier-free guidance scale (default: the model's, else 6)");
  cmd->add_option("--prompt", opt->prompt, "Prompt text (default \"a photo of a coat\")");
  cmd->add_option("--prompt-ids", opt->prompt_ids, "Complete understanding prefix as ids");
  cmd->add_option("--negative-prompt-ids", opt->negative_prompt_ids,
                  "Unconditional prefix as ids (default: empty text)");
  cmd->add_option("--latent-shape", opt->latent_shape, "Latent shape C,T,H,W (instead of height/width/frames)");
  cmd->add_option("--height", opt->height, "Image height in pixels");
  cmd->add_option("--width", opt->width, "Image width in pixels");
  cmd->add_option("--frames", opt->frames, "Number of frames (1 = image)");
  cmd->add_option("--scheduler-config", opt->scheduler_config, "A Diffusers scheduler_config.json");
  cmd->add_option("--repeat", opt->repeat, "Timed generations per mode")->default_val(3);
  cmd->add_option("--warmup", opt->warmup, "Untimed generations per mode first")->default_val(1);
  cmd->add_flag("--no-peer", opt->no_peer, "Skip the PyTorch peer");
  cmd->add_option("--python", opt->python, "Python for the peer")->default_val("/usr/bin/python3");
  cmd->add_option("--peer-script", opt->peer_script, "Peer script (default: bench/peer_generate.py)");
  cmd->add_option("--peer-threads", opt->peer_threads, "torch threads of the peer")->default_val(2);
  cmd->add_option("--peer-dtype", opt->peer_dtype, "Peer arithmetic: bf16 (autocast) or fp32")
      ->default_val("bf16")
      ->check(CLI::IsMember({"bf16", "fp32"}));
  cmd->add_option("--json", opt->json_file, "Also write the results as JSON");
  add_runtime_options(*cmd, opt->runtime);
  cmd->callback([opt] { run_bench(*opt); });
}

}  // namespace stepmix::cli
