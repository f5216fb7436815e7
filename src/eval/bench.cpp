// stepmix::bench (include/stepmix/tools.hpp): latency, throughput and memory
// of each precision mode of a checkpoint (BF16 dense, W8A16 every step, W8A8
// every step, the mixed schedule), and of the same model in a PyTorch eager
// peer (bench/peer_generate.py, the training code's model, bf16, 2 threads).
// The modes take turns, one generation each per round, so that the mixed
// schedule's cost over all-W8A8 is a paired figure.
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <thread>

#include "core/thread_pool.hpp"
#include "eval/metrics.hpp"
#include "io/safetensors.hpp"
#include "io/checkpoint.hpp"
#include "io/file_access.hpp"
#include "io/output_format.hpp"
#include "io/output_set.hpp"
#include "pipeline/model_setup.hpp"
#include "stepmix/tools.hpp"

namespace stepmix {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return 1e3 * double(t.tv_sec) + 1e-6 * double(t.tv_nsec);
}

// Wall time of each loop iteration: every transformer pass of the step (two
// with CFG) plus the scheduler update, which costs microseconds; and the
// process CPU time of each (all threads: on a machine other jobs share, what
// the step cost rather than how long it waited for a core).
struct StepTimer {
  std::vector<double> step_ms, step_cpu_ms;
  std::map<std::string, std::vector<double>> by_precision, cpu_by_precision;
  Clock::time_point begin;
  double cpu_begin = 0;

  GenerateCallbacks callbacks() {
    GenerateCallbacks c;
    c.on_step_begin = [this](const StepEvent&) {
      begin = Clock::now();
      cpu_begin = process_cpu_ms();
    };
    c.on_step_end = [this](const StepEvent& e, std::span<const float>) {
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
      const double cpu_ms = process_cpu_ms() - cpu_begin;
      step_ms.push_back(ms);
      step_cpu_ms.push_back(cpu_ms);
      by_precision[std::string(precision_trace_token(e.generation))].push_back(ms);
      cpu_by_precision[std::string(precision_trace_token(e.generation))].push_back(cpu_ms);
    };
    return c;
  }
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
  Model* model;
  PolicyOverrides policy;
};

// What runs the PyTorch peer, checked before anything runs.
struct PeerSettings {
  std::string python;
  std::string dtype;
  int threads = 2;
};

void check_range(const char* option, int value, int low, int high) {
  if (value < low || value > high)
    throw Error("bench", std::string(option) + ": expected an integer in [" + std::to_string(low) + ", " +
                             std::to_string(high) + "], got " + std::to_string(value));
}

// Every option of bench is checked before the model is opened.
PeerSettings check_bench_options(const BenchOptions& opt) {
  check_range("--repeat", opt.repeat, 1, 1000);
  check_range("--warmup", opt.warmup, 0, 1000);
  if (opt.request.steps) check_steps_value(*opt.request.steps, "bench", "--steps");
  // The options of the peer, where no peer runs, would be ignored: refused.
  // The peer is PyTorch on the CPU: beside a GPU run its ratio would compare
  // two machines. Skipped there (said in the output).
  const bool gpu = opt.runtime.device != Device::Cpu;
  const char* peer_option = opt.python         ? "--python"
                            : opt.peer_script  ? "--peer-script"
                            : opt.peer_threads ? "--peer-threads"
                            : opt.peer_dtype   ? "--peer-dtype"
                                               : nullptr;
  if (opt.no_peer && peer_option)
    throw Error("bench", std::string("--no-peer runs no peer: ") + peer_option + " would be ignored");
  if (gpu && peer_option)
    throw Error("bench", std::string(peer_option) +
                             ": the PyTorch peer of bench runs on the CPU, and --device cuda runs stepmix on the GPU; "
                             "pass --no-peer (bench/cuda-device-check.sh compares with PyTorch on the same GPU)");
  PeerSettings peer;
  peer.threads = opt.peer_threads.value_or(2);
  check_range("--peer-threads", peer.threads, 1, 1024);
  if (opt.python && access(opt.python->c_str(), X_OK) != 0)
    throw Error("bench", "--python " + *opt.python + ": " + errno_phrase(errno) +
                             " (expected the path of an executable, e.g. /usr/bin/python3)");
  if (opt.peer_script && !fs::is_regular_file(*opt.peer_script))
    throw Error("bench", "--peer-script " + *opt.peer_script + ": not a regular file");
  peer.python = opt.python.value_or("/usr/bin/python3");
  peer.dtype = opt.peer_dtype.value_or("bf16");
  if (peer.dtype != "bf16" && peer.dtype != "fp32")
    throw Error("bench", "--peer-dtype: expected bf16 or fp32, got '" + peer.dtype + "'");
  return peer;
}

// Times of one mode over the rounds.
struct ModeRuns {
  StepTimer timer;
  std::vector<double> e2e, e2e_cpu;  // per timed round
  std::string trace;
  int64_t device_peak = 0;
  int64_t rss_after_first = 0;  // process peak RSS when its first generation ended
};

// Every mode runs once per round, the rounds one after the other, and the
// order within a round rotates (round r starts at mode r mod n): a machine
// that gets slower or faster during the run shifts every mode alike rather
// than the ones that came last, which is what makes the paired mixed / W8A8
// ratio worth printing on a shared machine.
std::vector<ModeRuns> time_modes(const std::vector<ModeToRun>& modes, const GenerateRequest& request, int warmup,
                                 int repeat) {
  std::vector<ModeRuns> runs(modes.size());
  const std::size_t n_modes = modes.size();
  for (int round = 0; round < warmup + repeat; ++round) {
    const bool timed = round >= warmup;
    for (std::size_t j = 0; j < n_modes; ++j) {
      const std::size_t i = (std::size_t(round) + j) % n_modes;
      const ModeToRun& m = modes[i];
      ModeRuns& mr = runs[i];
      GenerateRequest r = request;
      r.policy = m.policy;
      m.model->reset_device_memory_peak();
      StepTimer warm;
      const auto t0 = Clock::now();
      const double cpu0 = process_cpu_ms();
      const GenerateResult result = m.model->generate(r, timed ? mr.timer.callbacks() : warm.callbacks());
      const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      mr.trace = trace_string(result.trace);
      mr.device_peak = std::max(mr.device_peak, m.model->device_memory_peak_bytes());
      if (mr.rss_after_first == 0) mr.rss_after_first = peak_rss_bytes();
      if (timed) {
        mr.e2e.push_back(seconds);
        mr.e2e_cpu.push_back((process_cpu_ms() - cpu0) * 1e-3);
      }
    }
  }
  return runs;
}

// The PyTorch eager peer on the same checkpoint, prompt, noise shape and
// timesteps: its result line, or {"error": why it did not run}.
json run_peer(const BenchOptions& opt, const GeneratePlan& base, const PeerSettings& settings, std::FILE* out) {
  const bool gpu = opt.runtime.device != Device::Cpu;
  const auto [C, T, H, W] = base.latent_shape;
  const double guidance = base.guidance;
  json peer;
  const std::optional<std::string> script = opt.no_peer || gpu ? std::nullopt : find_peer_script(opt);
  if (opt.no_peer) {
    peer = {{"error", "skipped (--no-peer)"}};
  } else if (gpu) {
    peer = {{"error",
             "skipped on --device cuda (the PyTorch peer runs on the CPU; bench/cuda-device-check.sh compares "
             "with PyTorch on the same GPU)"}};
  } else if (!script) {
    peer = {{"error", "bench/peer_generate.py not found (run from the repository root or pass --peer-script)"}};
  } else if (access(settings.python.c_str(), X_OK) != 0) {
    peer = {{"error", settings.python + " not found"}};
  } else {
    std::ostringstream ts, sig;
    ts.precision(17);
    sig.precision(9);
    for (std::size_t i = 0; i < base.timesteps.size(); ++i) ts << (i ? "," : "") << base.timesteps[i];
    for (std::size_t i = 0; i < base.sigmas.size(); ++i) sig << (i ? "," : "") << base.sigmas[i];
    const std::string cmd =
        shell_quote(settings.python) + " " + shell_quote(*script) + " --model " +
        shell_quote(opt.reference_dir.value_or(opt.model_dir)) + " --cond-ids " + join_ids(base.cond_ids) +
        (base.uncond_ids.empty() ? "" : " --uncond-ids " + join_ids(base.uncond_ids)) + " --latent-shape " +
        std::to_string(C) + "," + std::to_string(T) + "," + std::to_string(H) + "," + std::to_string(W) +
        " --guidance " + std::to_string(guidance) + " --timesteps " + ts.str() + " --sigmas " + sig.str() +
        " --repeat " + std::to_string(opt.repeat) + " --warmup " + std::to_string(opt.warmup) + " --threads " +
        std::to_string(settings.threads) + " --dtype " + shell_quote(settings.dtype) + " 2>&1";
    std::fflush(out);
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
      peer = {{"error", "cannot start " + settings.python}};
    }
  }
  return peer;
}

// The peer's row beside the modes', and each mode's speed-up over it
// (report["speedup_vs_peer"]).
void report_peer(const json& peer, int steps, const std::vector<std::pair<std::string, double>>& e2e_median,
                 json& report, std::FILE* out) {
  if (peer.contains("error")) {
    std::fprintf(out, "peer: not run: %s\n", peer["error"].get<std::string>().c_str());
  } else {
    const double peer_e2e = peer["end_to_end_s"]["median"].get<double>();
    const json& s = peer["step_ms"];
    char ms[64];
    std::snprintf(ms, sizeof ms, "%.2f [%.2f, %.2f]", s["median"].get<double>(), s["p10"].get<double>(),
                  s["p90"].get<double>());
    const std::string name = "pytorch " + peer.value("dtype", std::string("?"));
    std::fprintf(out, "%-20s %-26s %24s %11s %9.4g %8.4g %9.4g %9.1f %10s\n", name.c_str(),
                 ("eager, " + std::to_string(peer.value("threads", 0)) + " threads").c_str(), ms, "-", peer_e2e,
                 steps / peer_e2e, 1.0 / peer_e2e, double(peer.value("peak_rss_bytes", int64_t(0))) / (1 << 20), "-");
    std::string libs;
    for (const json& lib : peer.value("blas", json::array()))
      libs.append(" ").append(fs::path(lib.get<std::string>()).filename().string());
    std::fprintf(out, "peer: torch %s, %s, weights: %s, CFG batched: %s, libraries:%s\n",
                 peer.value("torch", std::string("?")).c_str(), peer.value("dtype", std::string("?")).c_str(),
                 peer.value("weights", std::string("?")).c_str(), peer.value("cfg_batched", false) ? "yes" : "no",
                 libs.empty() ? " ?" : libs.c_str());
    json ratios = json::object();
    std::fprintf(out, "speed-up over the peer (end-to-end):");
    for (const auto& [name_, e2e] : e2e_median) {
      ratios[name_] = peer_e2e / e2e;
      std::fprintf(out, " %s %.2fx", name_.c_str(), peer_e2e / e2e);
    }
    std::fprintf(out, "\n");
    report["speedup_vs_peer"] = ratios;
  }
}

// The modes bench times: the BF16 reference (--reference), then BF16 for a
// dense --model, else W8A16 and W8A8 everywhere and the mixed schedule (the
// checkpoint's, or the forced 3/3 default). Every plan is checked here.
std::vector<ModeToRun> modes_to_time(Model& model, std::optional<Model>& reference, const BenchOptions& opt,
                                     const GeneratePlan& base, const GenerateRequest& request) {
  const int steps = base.steps;
  std::vector<ModeToRun> modes;
  if (opt.reference_dir) {
    reference.emplace(Model::open(*opt.reference_dir, reference_options(opt.runtime)));
    if (reference->info().has_fp8)
      throw Error("bench", "--reference " + *opt.reference_dir + " is not a BF16 checkpoint");
    modes.push_back({"bf16", &*reference, {}});
  }
  if (!model.info().has_fp8) {
    if (opt.reference_dir) throw Error("bench", "--reference is for an FP8 --model; this one is BF16 already");
    modes.push_back({"bf16", &model, {}});
  } else {
    modes.push_back({"w8a16", &model, {MixedPrecisionMode::Fp8, steps, 0, TowerMode::A16, std::nullopt}});
    modes.push_back({"w8a8", &model, {MixedPrecisionMode::None, {}, {}, {}, {}}});
    const bool own = base.policy.enabled && request.policy.mode == MixedPrecisionMode::Auto;
    modes.push_back({own ? "mixed" : "mixed (forced 3/3)", &model,
                     own ? PolicyOverrides{} : PolicyOverrides{MixedPrecisionMode::Fp8, {}, {}, {}, {}}});
  }
  for (const ModeToRun& m : modes) {
    GenerateRequest r = request;
    r.policy = m.policy;
    m.model->plan(r);  // every mode's plan is valid before anything is timed
  }
  return modes;
}

// One mode's row of the table and its entry in the JSON report.
json report_mode(const ModeToRun& m, const ModeRuns& mr, int steps, std::FILE* out) {
  const StepTimer& timer = mr.timer;
  json by_precision = json::object(), cpu_by_precision = json::object();
  for (const auto& [token, v] : timer.by_precision) by_precision[token] = median(v);
  for (const auto& [token, v] : timer.cpu_by_precision) cpu_by_precision[token] = median(v);
  const double e2e_med = median(mr.e2e);
  const int64_t weights = m.model->weight_bytes_resident();
  json j = {{"name", m.name},
            {"trace", mr.trace},
            {"step_ms", spread(timer.step_ms)},
            {"step_ms_median_by_precision", by_precision},
            {"step_cpu_ms", spread(timer.step_cpu_ms)},
            {"step_cpu_ms_median_by_precision", cpu_by_precision},
            {"end_to_end_s", spread(mr.e2e)},
            {"end_to_end_cpu_s", spread(mr.e2e_cpu)},
            {"steps_per_s", steps / e2e_med},
            {"images_per_s", 1.0 / e2e_med},
            {"peak_rss_bytes", mr.rss_after_first},
            {"weight_bytes_resident", weights},
            {"weight_cache_bytes", m.model->weight_cache_bytes()},
            {"peak_device_memory_bytes", mr.device_peak}};
  const json& s = j["step_ms"];
  char ms[64];
  std::snprintf(ms, sizeof ms, "%.2f [%.2f, %.2f]", s["median"].get<double>(), s["p10"].get<double>(),
                s["p90"].get<double>());
  std::fprintf(out, "%-20s %-26s %24s %11.2f %9.4g %8.4g %9.4g %9.1f %10.2f\n", m.name.c_str(), mr.trace.c_str(), ms,
               median(timer.step_cpu_ms), e2e_med, steps / e2e_med, 1.0 / e2e_med,
               double(mr.rss_after_first) / (1 << 20), double(weights) / (1 << 20));
  return j;
}

// What the step policy costs over running every step W8A8: per round, the
// mixed generation's time over the W8A8 one of the same round.
void report_mixed_overhead(const std::vector<ModeToRun>& modes, const std::vector<ModeRuns>& runs, json& report,
                           std::FILE* out) {
  const std::size_t n_modes = modes.size();
  const auto index_of = [&](std::string_view prefix) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < n_modes; ++i)
      if (modes[i].name.starts_with(prefix)) return i;
    return std::nullopt;
  };
  if (const auto mixed = index_of("mixed"), w8a8 = index_of("w8a8"); mixed && w8a8) {
    std::vector<double> wall, cpu;
    for (std::size_t r = 0; r < runs[*mixed].e2e.size(); ++r) {
      wall.push_back(runs[*mixed].e2e[r] / runs[*w8a8].e2e[r] - 1);
      cpu.push_back(runs[*mixed].e2e_cpu[r] / runs[*w8a8].e2e_cpu[r] - 1);
    }
    report["mixed_over_w8a8"] = {{"end_to_end", spread(wall)}, {"cpu", spread(cpu)}};
    std::fprintf(out,
                 "%s over w8a8: %+.1f%% end-to-end, %+.1f%% CPU time (median of %zu paired rounds; wall range "
                 "[%+.1f%%, %+.1f%%])\n",
                 modes[*mixed].name.c_str(), 100 * median(wall), 100 * median(cpu), wall.size(),
                 100 * quantile(wall, 0), 100 * quantile(wall, 1));
  }
}

}  // namespace

void bench(const BenchOptions& opt, std::FILE* out) {
  const PeerSettings peer_settings = check_bench_options(opt);
  const bool gpu = opt.runtime.device != Device::Cpu;

  // --json is checked before anything runs and written whole at the end.
  OutputSet outputs;
  OutputSet::Id json_out{};  // meaningful only with --json
  outputs.add_input("--model", opt.model_dir);
  if (opt.reference_dir) outputs.add_input("--reference", *opt.reference_dir);
  if (opt.json_file) json_out = outputs.add_file("--json", *opt.json_file);
  if (opt.json_file) output_format_for(*opt.json_file, "--json", {OutputFormat::Json});
  outputs.validate();

  Model model = Model::open(opt.model_dir, opt.runtime);
  const int64_t rss_after_load = peak_rss_bytes();
  GenerateRequest request = opt.request;
  if (!request.prompt && !request.prompt_ids) request.prompt = "a photo of a coat";
  const GeneratePlan base = model.plan(request);
  for (const std::string& note : base.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  for (const std::string& w : base.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  const int steps = base.steps;
  const double guidance = base.guidance;
  request = sampled_exactly(request, base);

  std::optional<Model> reference;
  const std::vector<ModeToRun> modes = modes_to_time(model, reference, opt, base, request);

  const auto [C, T, H, W] = base.latent_shape;
  // A GPU run starts no CPU thread pool: the device is what runs it.
  const int threads = ThreadPool::configured_size();
  const std::string runs_on =
      gpu ? "device " + std::string(device_name(opt.runtime.device)) : "threads " + std::to_string(threads);
  std::fprintf(out, "bench: %s  steps %d  guidance %g  latent %lld,%lld,%lld,%lld  repeat %d (+%d warm-up)  %s\n",
               opt.model_dir.c_str(), steps, guidance, (long long)C, (long long)T, (long long)H, (long long)W,
               opt.repeat, opt.warmup, runs_on.c_str());
  // Timings next to other jobs are not the machine's: say so rather than hide it.
  double load[1] = {0};
  const bool have_load = getloadavg(load, 1) == 1;
  const unsigned cores = std::thread::hardware_concurrency();
  if (have_load && cores && load[0] > cores)
    std::fprintf(out,
                 "warning: load average %.1f on %u hardware threads: other jobs share the CPU; timings are contended\n",
                 load[0], cores);
  std::fprintf(out, "%-20s %-26s %24s %11s %9s %8s %9s %9s %10s\n", "mode", "trace", "ms/step median [p10,p90]",
               "cpu ms/step", "e2e s", "steps/s", "images/s", "peak MiB", "weights MiB");
  json report = {{"model", opt.model_dir},
                 {"reference", opt.reference_dir ? json(*opt.reference_dir) : json()},
                 {"steps", steps},
                 {"guidance", guidance},
                 {"latent_shape", base.latent_shape},
                 {"repeat", opt.repeat},
                 {"warmup", opt.warmup},
                 {"threads", threads},
                 {"activations", std::string(activation_dtype_name(opt.runtime.activations))},
                 {"weight_cache", std::string(weight_cache_name(opt.runtime.weight_cache))},
                 {"w8a16_rounding", std::string(w8a16_rounding_name(opt.runtime.w8a16_rounding))},
                 {"device", std::string(device_name(opt.runtime.device))},
                 {"hardware_threads", std::thread::hardware_concurrency()},
                 {"load_average_1m", have_load ? json(load[0]) : json()},
                 {"peak_rss_bytes_after_load", rss_after_load}};
  const std::vector<ModeRuns> runs = time_modes(modes, request, opt.warmup, opt.repeat);

  json modes_json = json::array();
  std::vector<std::pair<std::string, double>> e2e_median;  // in table order
  for (std::size_t i = 0; i < modes.size(); ++i) {
    modes_json.push_back(report_mode(modes[i], runs[i], steps, out));
    e2e_median.emplace_back(modes[i].name, median(runs[i].e2e));
  }
  report_mixed_overhead(modes, runs, report, out);
  report["modes"] = modes_json;
  if (opt.runtime.device == Device::Cuda) {
    // Device buffers held at once during each mode's runs (the CUDA context is extra).
    std::fprintf(out, "peak GPU memory:");
    for (const json& j : modes_json)
      std::fprintf(out, " %s %.1f MiB", j["name"].get<std::string>().c_str(),
                   double(j["peak_device_memory_bytes"].get<int64_t>()) / (1 << 20));
    std::fprintf(out, "\n");
  }

  const json peer = run_peer(opt, base, peer_settings, out);
  report_peer(peer, steps, e2e_median, report, out);
  report["peer"] = peer;
  if (opt.json_file) {
    outputs.stage_file(json_out, report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    outputs.commit();
    std::fprintf(out, "json: %s\n", opt.json_file->c_str());
  }
}

}  // namespace stepmix
