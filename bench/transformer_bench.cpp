// Cosmos3 transformer forward timing (stepmix side of bench/run-transformer.sh).
//
//   bench_transformer make --dir DIR --hidden H [--layers 4] [--text 64]
//                          [--tokens 256,1024,4096] [--seed 1]
//     Writes a seeded random model of the benchmark shape (head_dim 128,
//     GQA 4:1, intermediate 3·H) as DIR/bf16 (BF16 checkpoint) and DIR/fp8
//     (ModelOpt FP8 from the same weights), and DIR/inputs-N.safetensors: one
//     text-to-image call with `text` prompt tokens and N vision tokens
//     (a square latent of 2·sqrt(N) pixels a side, patch 2).
//
//   bench_transformer time --dir DIR --mode dense|w8a16|w8a8 --tokens N[,N...]
//                          [--repeats R] [--activation bf16|f32]
//     Loads DIR/bf16 (dense) or DIR/fp8, runs one warm-up forward and R timed
//     forwards per token count, both towers at the mode, with the
//     understanding cache off (every forward recomputes the text stream, as
//     the PyTorch peer does). Writes DIR/velocity-<mode>-<N>.f32 (raw float32)
//     and prints one JSON object per token count:
//     {"tokens", "mode", "activation", "threads", "load_average" (1 min, at the start),
//      "ms": [each timed forward]}.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "core/thread_pool.hpp"
#include "io/checkpoint.hpp"
#include "io/safetensors.hpp"
#include "synthetic_checkpoint.hpp"
#include "model/transformer.hpp"
#include "stepmix/error.hpp"

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
};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 2; i < argc; i += 2) {
    if (std::strncmp(argv[i], "--", 2) != 0 || i + 1 >= argc) throw Error("bench", std::string("bad argument ") + argv[i]);
    o.values[argv[i] + 2] = argv[i + 1];
  }
  return o;
}

SyntheticModelShape bench_shape(int64_t hidden, int64_t layers) {
  SyntheticModelShape s;
  s.hidden_size = hidden;
  s.intermediate_size = 3 * hidden;
  s.layers = layers;
  s.head_dim = 128;
  s.heads = hidden / 128;
  s.kv_heads = s.heads / 4;
  s.vocab_size = 1024;
  s.latent_channel = 48;
  s.patch = 2;
  return s;
}

int make(const Options& o) {
  const std::string dir = o.get("dir");
  const SyntheticModelShape shape = bench_shape(std::stoll(o.get("hidden")), std::stoll(o.get("layers", "4")));
  const uint64_t seed = std::stoull(o.get("seed", "1"));
  write_synthetic_transformer(dir + "/bf16", shape, false, seed);
  write_synthetic_transformer(dir + "/fp8", shape, true, seed);
  for (int64_t tokens : parse_list(o.get("tokens", "256,1024,4096"))) {
    const int64_t side = int64_t(std::lround(std::sqrt(double(tokens))));
    if (side * side != tokens) throw Error("bench", "token counts must be squares, got " + std::to_string(tokens));
    const ForwardInputs in = synthetic_inputs(shape, std::stoll(o.get("text", "64")), 2 * side, 2 * side, 500.0f,
                                              seed + uint64_t(tokens));
    write_forward_inputs(dir + "/inputs-" + std::to_string(tokens) + ".safetensors", in);
  }
  return 0;
}

int time_forwards(const Options& o) {
  const std::string dir = o.get("dir"), mode_name = o.get("mode");
  const std::map<std::string, Precision> modes = {
      {"dense", Precision::BF16}, {"w8a16", Precision::W8A16}, {"w8a8", Precision::W8A8}};
  if (!modes.count(mode_name)) throw Error("bench", "--mode must be dense, w8a16 or w8a8");
  const Precision mode = modes.at(mode_name);
  const std::string activation = o.get("activation", "bf16");
  const int repeats = std::stoi(o.get("repeats", "3"));

  Cosmos3Transformer model =
      Cosmos3Transformer::load(ModelDirectory::open(dir + (mode == Precision::BF16 ? "/bf16" : "/fp8")));
  const ForwardOptions options{mode, mode, activation == "f32" ? ActivationDType::F32 : ActivationDType::BF16};
  model.understanding_cache().set_capacity(0);
  for (int64_t tokens : parse_list(o.get("tokens"))) {
    const auto file = SafetensorsFile::open(dir + "/inputs-" + std::to_string(tokens) + ".safetensors");
    const ForwardInputs in = read_forward_inputs(*file);
    HostTensor velocity = model.forward(in, options);  // warm-up: scratch, page-ins of the mapped weights
    std::vector<double> ms;
    for (int r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      velocity = model.forward(in, options);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::ofstream(dir + "/velocity-" + mode_name + "-" + std::to_string(tokens) + ".f32", std::ios::binary)
        .write(reinterpret_cast<const char*>(velocity.data.data()), std::streamsize(velocity.data.size() * 4));
    double load[1] = {-1.0};
    getloadavg(load, 1);
    std::printf("{\"tokens\": %lld, \"mode\": \"%s\", \"activation\": \"%s\", \"threads\": %d, \"load_average\": %.2f, \"ms\": [",
                (long long)tokens, mode_name.c_str(), activation.c_str(), ThreadPool::global().size(), load[0]);
    for (std::size_t i = 0; i < ms.size(); ++i) std::printf("%s%.3f", i ? ", " : "", ms[i]);
    std::printf("]}\n");
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
