// Cosmos3 transformer forward timing (stepmix side of bench/run-transformer.sh).
//
//   bench_transformer make --dir DIR --hidden H [--layers 4] [--text 64]
//                          [--tokens 256,1024,4096] [--seed 1] [--formats bf16,fp8]
//                          [--shards] [--inputs yes|no]
//     Writes a seeded random model of the benchmark shape (head_dim 128,
//     GQA 4:1, intermediate 3·H; hidden 4096 is Cosmos3-Nano's width) as
//     DIR/bf16 (BF16 checkpoint) and/or DIR/fp8 (ModelOpt FP8 from the same
//     weights, first-3/last-3 W8A16 step policy), each a model folder
//     `stepmix` opens, one safetensors shard per layer with --shards; and
//     DIR/inputs-N.safetensors and DIR/inputs-N-uncond.safetensors: the two
//     CFG passes of one text-to-image call with `text` prompt tokens each and
//     N vision tokens (a square latent of 2·sqrt(N) pixels a side, patch 2).
//     Says how much disk it needs and refuses when the file system has less.
//
//   bench_transformer time --dir DIR --mode dense|w8a16|w8a8 --tokens N[,N...]
//                          [--repeats R] [--activation bf16|f32] [--cfg off|separate|batched]
//     Loads DIR/bf16 (dense) or DIR/fp8 on a profiling backend
//     (profiling_backend.hpp), runs one warm-up call and R timed calls per
//     token count, both towers at the mode, with the understanding cache off
//     (every call recomputes the text stream, as the PyTorch peer does). A
//     call is one pass (--cfg off, default), the conditional and the
//     unconditional pass one after the other (separate), or both in one
//     batched forward (batched). Writes DIR/velocity-<mode>-<N>[-cfg].f32
//     (raw float32; cond then uncond with CFG) and prints one JSON object per
//     token count: {"tokens", "mode", "activation", "cfg", "threads",
//     "load_average" (1 min, at the start), "ms": [wall time of each timed call],
//     "cpu_ms": [process CPU time of each], "flops" (per call),
//     "profile": {kind: {"ms", "calls", "flops"} per call}, "quantize_ms" (of the
//     W8A8 activation quantization inside the linears, timed apart)}.
#include <sys/statvfs.h>
#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "core/thread_pool.hpp"
#include "io/checkpoint.hpp"
#include "io/safetensors.hpp"
#include "kernels/kernel_set.hpp"
#include "model/transformer.hpp"
#include "profiling_backend.hpp"
#include "stepmix/error.hpp"
#include "synthetic_checkpoint.hpp"

namespace {

using namespace stepmix;
using bench::parse_list;


struct Options {
  std::map<std::string, std::string> values;
  std::string get(const std::string& key, const std::string& fallback = "") const {
    auto it = values.find(key);
    if (it != values.end()) return it->second;
    if (fallback.empty()) throw Error("bench", "missing --" + key);
    return fallback;
  }
  bool flag(const std::string& key) const { return values.count(key) != 0; }
};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 2; i < argc; ++i) {
    if (std::strncmp(argv[i], "--", 2) != 0) throw Error("bench", std::string("bad argument ") + argv[i]);
    if (!std::strcmp(argv[i], "--shards")) {
      o.values["shards"] = "yes";
      continue;
    }
    if (i + 1 >= argc) throw Error("bench", std::string("missing value of ") + argv[i]);
    o.values[argv[i] + 2] = argv[i + 1];
    ++i;
  }
  return o;
}

double gib(double bytes) { return bytes / double(1ull << 30); }

// Refuses (with the numbers) when `folder`'s file system cannot take `bytes`
// plus a 5% margin.
void check_free_disk(const std::string& folder, double bytes) {
  std::filesystem::create_directories(folder);
  struct statvfs fs {};
  if (statvfs(folder.c_str(), &fs) != 0) throw Error("bench", folder + ": cannot read the free disk space");
  const double free_bytes = double(fs.f_bavail) * double(fs.f_frsize);
  std::fprintf(stderr, "bench_transformer: the checkpoints need %.2f GiB; %.2f GiB free on %s\n", gib(bytes),
               gib(free_bytes), folder.c_str());
  if (bytes * 1.05 > free_bytes)
    throw Error("bench", folder + ": not enough disk: needs " + std::to_string(gib(bytes)) + " GiB, " +
                             std::to_string(gib(free_bytes)) + " GiB free");
}

int make(const Options& o) {
  const std::string dir = o.get("dir");
  const SyntheticModelShape shape = benchmark_shape(std::stoll(o.get("hidden")), std::stoll(o.get("layers", "4")));
  const std::string formats = o.get("formats", "bf16,fp8");
  const bool bf16 = formats.find("bf16") != std::string::npos, fp8 = formats.find("fp8") != std::string::npos;
  if (!bf16 && !fp8) throw Error("bench", "--formats: expected bf16, fp8 or bf16,fp8");
  check_free_disk(dir, double((bf16 ? synthetic_checkpoint_bytes(shape, false) : 0) +
                              (fp8 ? synthetic_checkpoint_bytes(shape, true) : 0)));
  SyntheticWriteOptions w;
  w.seed = std::stoull(o.get("seed", "1"));
  w.shard_per_layer = o.flag("shards");
  w.progress = [](const std::string& what) { std::fprintf(stderr, "  %s\n", what.c_str()); };
  for (bool quantized : {false, true}) {
    if (quantized ? !fp8 : !bf16) continue;
    w.fp8 = quantized;
    const std::string folder = dir + (quantized ? "/fp8" : "/bf16");
    std::fprintf(stderr, "bench_transformer: writing %s\n", folder.c_str());
    write_synthetic_transformer(folder, shape, w);
  }
  const int64_t text = std::stoll(o.get("text", "64"));
  for (int64_t tokens : parse_list(o.get("tokens", "256,1024,4096"))) {
    const int64_t side = int64_t(std::lround(std::sqrt(double(tokens))));
    if (side * side != tokens) throw Error("bench", "token counts must be squares, got " + std::to_string(tokens));
    const std::string base = dir + "/inputs-" + std::to_string(tokens);
    const ForwardInputs cond = synthetic_inputs(shape, text, 2 * side, 2 * side, 500.0f, w.seed + uint64_t(tokens));
    // The unconditional pass: the same latent and length, other prompt ids.
    ForwardInputs uncond = synthetic_inputs(shape, text, 2 * side, 2 * side, 500.0f, w.seed + uint64_t(tokens) + 7);
    uncond.latent = cond.latent;
    write_forward_inputs(base + ".safetensors", cond);
    write_forward_inputs(base + "-uncond.safetensors", uncond);
  }
  return 0;
}

// Wall time of the W8A8 activation quantizations one call made, each [M, K]
// quantized again here on the pool (the split Linear uses).
double quantize_seconds(const std::map<std::pair<int64_t, int64_t>, int64_t>& counts, bool bf16) {
  const auto& k = kernels::active_kernels().linear;
  double total = 0;
  for (const auto& [shape, count] : counts) {
    const auto [M, K] = shape;
    std::vector<uint16_t> xb(std::size_t(M * K), 0x3F00);
    std::vector<float> xf(std::size_t(M * K), 0.5f);
    std::vector<uint8_t> codes(std::size_t(M * K));
    const int64_t rows_per_task = std::max<int64_t>(1, (16384 + K - 1) / K);
    auto once = [&] {
      ThreadPool::global().parallel_for((M + rows_per_task - 1) / rows_per_task, [&](int64_t t) {
        const int64_t row0 = t * rows_per_task, n = std::min(rows_per_task, M - row0) * K;
        if (bf16) {
          k.quantize_e4m3_bf16(xb.data() + row0 * K, n, 0.02f, codes.data() + row0 * K);
        } else {
          k.quantize_e4m3_f32(xf.data() + row0 * K, n, 0.02f, codes.data() + row0 * K);
        }
      });
    };
    once();
    double best = 1e30;
    for (int r = 0; r < 3; ++r) {
      const auto start = std::chrono::steady_clock::now();
      once();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    total += best * double(count);
  }
  return total;
}

int time_forwards(const Options& o) {
  const std::string dir = o.get("dir"), mode_name = o.get("mode"), cfg = o.get("cfg", "off");
  const std::map<std::string, Precision> modes = {
      {"dense", Precision::BF16}, {"w8a16", Precision::W8A16}, {"w8a8", Precision::W8A8}};
  if (!modes.count(mode_name)) throw Error("bench", "--mode must be dense, w8a16 or w8a8");
  if (cfg != "off" && cfg != "separate" && cfg != "batched")
    throw Error("bench", "--cfg must be off, separate or batched");
  const Precision mode = modes.at(mode_name);
  const std::string activation = o.get("activation", "bf16");
  const ActivationDType act = activation == "f32" ? ActivationDType::F32 : ActivationDType::BF16;
  const int repeats = std::stoi(o.get("repeats", "3"));

  ProfilingBackend backend(cpu_backend());
  Cosmos3Transformer model =
      Cosmos3Transformer::load(ModelDirectory::open(dir + (mode == Precision::BF16 ? "/bf16" : "/fp8")),
                               WeightCache::None, backend);
  model.understanding_cache().set_capacity(0);
  const ForwardOptions options{mode, mode, act};
  for (int64_t tokens : parse_list(o.get("tokens"))) {
    const std::string base = dir + "/inputs-" + std::to_string(tokens);
    const ForwardInputs cond = read_forward_inputs(*SafetensorsFile::open(base + ".safetensors"));
    const ForwardInputs uncond = read_forward_inputs(*SafetensorsFile::open(base + "-uncond.safetensors"));
    auto call = [&] {
      if (cfg == "off") return std::vector<HostTensor>{model.forward(cond, options)};
      if (cfg == "separate") return std::vector<HostTensor>{model.forward(cond, options), model.forward(uncond, options)};
      const ForwardInputs* both[2] = {&cond, &uncond};
      return model.forward_batch(both, options);
    };
    std::vector<HostTensor> velocity = call();  // warm-up: scratch, page-ins of the mapped weights
    backend.reset();
    double load[1] = {-1.0};
    getloadavg(load, 1);
    std::vector<double> ms, cpu_ms;
    for (int r = 0; r < repeats; ++r) {
      const double cpu0 = process_cpu_seconds();
      const auto start = std::chrono::steady_clock::now();
      velocity = call();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      cpu_ms.push_back(1e3 * (process_cpu_seconds() - cpu0));
    }
    std::ofstream out(dir + "/velocity-" + mode_name + "-" + std::to_string(tokens) + (cfg == "off" ? "" : "-cfg") + ".f32",
                      std::ios::binary);
    for (const HostTensor& v : velocity)
      out.write(reinterpret_cast<const char*>(v.data.data()), std::streamsize(v.data.size() * 4));

    double flops = 0;
    std::string profile;
    for (const auto& [kind, t] : backend.totals()) {
      flops += t.flops / repeats;
      char entry[256];
      std::snprintf(entry, sizeof entry, "%s\"%s\": {\"ms\": %.3f, \"cpu_ms\": %.3f, \"calls\": %lld, \"flops\": %.6g}",
                    profile.empty() ? "" : ", ", kind.c_str(), 1e3 * t.seconds / repeats, 1e3 * t.cpu_seconds / repeats,
                    (long long)(t.calls / repeats), t.flops / repeats);
      profile += entry;
    }
    const double quantize_ms = 1e3 * quantize_seconds(backend.quantizations(), act == ActivationDType::BF16) / repeats;
    std::printf("{\"tokens\": %lld, \"mode\": \"%s\", \"activation\": \"%s\", \"cfg\": \"%s\", \"kernels\": \"%s\", "
                "\"threads\": %d, \"load_average\": %.2f, \"flops\": %.6g, \"quantize_ms\": %.3f, \"profile\": {%s}, ",
                (long long)tokens, mode_name.c_str(), activation.c_str(), cfg.c_str(),
                kernels::active_kernels().describe().c_str(), ThreadPool::global().size(), load[0], flops, quantize_ms,
                profile.c_str());
    auto list = [](const std::vector<double>& v) {
      std::string s;
      for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
      return s;
    };
    std::printf("\"ms\": [%s], \"cpu_ms\": [%s]}\n", list(ms).c_str(), list(cpu_ms).c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string command = argc > 1 ? argv[1] : "";
    if (command == "make") return make(parse_options(argc, argv));
    if (command == "time") return time_forwards(parse_options(argc, argv));
    std::fprintf(stderr, "usage: %s make|time --dir DIR ... (see bench/transformer_bench.cpp)\n", argv[0]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_transformer: %s\n", e.what());
    return 2;
  }
}
