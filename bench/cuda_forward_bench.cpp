// A Cosmos3-Nano-shaped transformer forward on the CUDA backend (the stepmix
// side of the forward benchmark of bench/cuda-device-check.sh; the PyTorch
// peer is bench/cuda_peer_forward.py).
//
//   bench_cuda_forward --dir DIR [--layers 1,4] [--tokens 44160,1024] [--text 300] [--reps 3] [--cfg-reps 1]
//                      [--profile 1] [--tiny]
//
// Nano's shape (hidden 4096, FFN 12288, 32 query / 8 KV heads, head_dim 128,
// 48 latent channels, patch 2) with fewer layers: for each layer count, a
// seeded random checkpoint (tests/support/synthetic_checkpoint: BF16, and
// ModelOpt FP8 of the same weights) written under DIR once. Token counts:
// 44,160 = a 720p, 189-frame video (latent [1, 48, 48, 45, 80]), 1,024 = a
// 1024² image (latent [1, 48, 1, 64, 64]); a prompt of `text` tokens, two
// prompts (the CFG passes) whose understanding K/V stay cached, as in the
// denoising loop. --tiny: a small model of the same architecture (hidden
// 512, FFN 1536, 4 / 2 heads of 128) that the CPU build's SIMT emulator runs
// in seconds (bench_cuda_forward_on_cpu, tests/cuda/bench_on_cpu.sh).
//
// Per (layers, mode, tokens): the first forward (weights uploaded, plans
// made) is not timed; then the understanding prefill (a forward with the
// cache cleared, minus a warm one) and `reps` timed warm forwards, each a
// whole call as the denoising loop makes it (Cosmos3Transformer::
// forward_resident: latent and velocity in device memory, the host waiting
// for the velocity). Modes: dense (BF16 checkpoint), w8a16, w8a8 (FP8
// checkpoint), both towers at the mode. Then a CFG step both ways the loop
// can run it ("cfg_step": the two passes as two calls, and as one batched
// call over the one latent writing both velocities), the peak device memory
// after it. Then where a warm forward's time goes ("forward_profile": one
// forward on profiling_backend.hpp, each operation timed from an idle stream
// to its completion: ms, calls and TFLOP/s or TB/s per kind of operation;
// --profile 0 leaves it out). Also the loop's own part of a step on the
// device at that latent size (CFG combination and a UniPC update). One JSON
// object per line.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "cuda_bench_cases.hpp"
#include "backend/backend.hpp"
#include "io/checkpoint.hpp"
#include "profiling_backend.hpp"
#include "kernels/cuda/cuda_device.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "model/transformer.hpp"
#include "sched/config.hpp"
#include "sched/scheduler.hpp"
#include "stepmix/error.hpp"
#include "synthetic_checkpoint.hpp"

namespace {

using namespace stepmix;
using bench::parse_list;
using Clock = std::chrono::steady_clock;

SyntheticModelShape nano_shape(int64_t layers, bool tiny) {
  SyntheticModelShape s;
  s.hidden_size = tiny ? 512 : 4096;
  s.intermediate_size = tiny ? 1536 : 12288;
  s.layers = layers;
  s.heads = tiny ? 4 : 32;
  s.kv_heads = tiny ? 2 : 8;
  s.head_dim = 128;
  s.vocab_size = 1024;
  s.latent_channel = 48;
  s.patch = 2;
  return s;
}

// The latent [1, 48, T, H, W] of a token count this benchmark knows.
std::array<int64_t, 3> latent_of(int64_t tokens) {
  if (tokens == 44160) return {48, 45, 80};  // 720p, 189 frames: Hp 23 (H padded), Wp 40, 920 tokens a frame
  if (tokens == 1024) return {1, 64, 64};    // 1024²
  const int64_t side = int64_t(std::lround(std::sqrt(double(tokens))));
  if (side * side != tokens) throw Error("bench", "--tokens: 44160, 1024 or a square, got " + std::to_string(tokens));
  return {1, 2 * side, 2 * side};
}

// One pass of a text-to-video call: `text` prompt ids from `seed`, position
// ids as the pipeline lays them out (text (i,i,i); vision (L+15000+t, h, w)),
// a uniform random latent, one timestep for every token.
ForwardInputs nano_inputs(const SyntheticModelShape& s, int64_t tokens, int64_t text, uint64_t seed) {
  const auto [T, H, W] = latent_of(tokens);
  ForwardInputs in = synthetic_inputs(s, text, H, W, 500.0f, seed);  // T = 1; widened below
  const int64_t L = text, Hp = (H + 1) / 2, Wp = (W + 1) / 2, Nv = T * Hp * Wp, S = L + Nv;
  std::vector<float> positions(std::size_t(3 * S), 0.0f);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t axis = 0; axis < 3; ++axis) positions[std::size_t(axis * S + i)] = float(i);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < Hp; ++h)
      for (int64_t w = 0; w < Wp; ++w) {
        const int64_t col = L + (t * Hp + h) * Wp + w;
        positions[std::size_t(col)] = float(L + 15000 + t);
        positions[std::size_t(S + col)] = float(h);
        positions[std::size_t(2 * S + col)] = float(w);
      }
  in.position_ids = std::move(positions);
  const std::vector<float> frame = in.latent.data;  // [C, H, W]
  in.latent.shape = {1, s.latent_channel, T, H, W};
  in.latent.data.resize(std::size_t(s.latent_channel * T * H * W));
  for (int64_t c = 0; c < s.latent_channel; ++c)
    for (int64_t t = 0; t < T; ++t)
      std::copy_n(frame.begin() + c * H * W, H * W, in.latent.data.begin() + (c * T + t) * H * W);
  return in;
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string list(const std::vector<double>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

struct Options {
  std::string dir;
  std::vector<int64_t> layers{1, 4}, tokens{44160, 1024};
  int64_t text = 300;
  int reps = 3;
  int cfg_reps = 1;  // CFG steps timed each way (0: none)
  bool profile = true;  // one profiled forward per case
  bool tiny = false;
};

std::string model_folder(const Options& o, int64_t layers) {
  return o.dir + (o.tiny ? "/tiny-" : "/nano-") + std::to_string(layers) + "-layers";
}

// One warm forward on the profiler, turned on for it: a "forward_profile"
// record, its "ms" the sum of the kinds' (each operation waited for), TFLOP/s
// for the kinds that count FLOPs (Linears, attention, the timestep MLP), TB/s
// read + written for the memory-bound ones (norms, rotary, element-wise).
void profile_forward(ProfilingBackend& profiler, const std::function<void()>& forward, const std::string& mode_name,
                     int64_t layers, int64_t tokens) {
  profiler.reset();
  profiler.set_enabled(true);
  forward();
  profiler.set_enabled(false);
  std::string kinds;
  double total_ms = 0;
  for (const auto& [kind, t] : profiler.totals()) {
    const double ms = 1e3 * t.seconds;
    total_ms += ms;
    char entry[200], rate[48] = "";
    if (t.flops > 0 && t.seconds > 0) std::snprintf(rate, sizeof rate, ", \"tflops\": %.4g", t.flops / t.seconds / 1e12);
    else if (t.bytes > 0 && t.seconds > 0)
      std::snprintf(rate, sizeof rate, ", \"tb_per_s\": %.4g", t.bytes / t.seconds / 1e12);
    std::snprintf(entry, sizeof entry, "%s\"%s\": {\"ms\": %.3f, \"calls\": %lld%s}", kinds.empty() ? "" : ", ",
                  kind.c_str(), ms, (long long)t.calls, rate);
    kinds += entry;
  }
  std::printf("{\"impl\": \"stepmix\", \"bench\": \"forward_profile\", \"mode\": \"%s\", \"layers\": %lld, "
              "\"tokens\": %lld, \"ms\": %.3f, \"profile\": {%s}}\n",
              mode_name.c_str(), (long long)layers, (long long)tokens, total_ms, kinds.c_str());
  std::fflush(stdout);
}

void time_model(const Options& o, int64_t layers, const std::string& mode_name, Precision mode) {
  const SyntheticModelShape shape = nano_shape(layers, o.tiny);
  const std::string folder = model_folder(o, layers) + (mode == Precision::BF16 ? "/bf16" : "/fp8");
  // On the profiler, which only forwards (and never waits) until a profiled
  // forward turns it on.
  ProfilingBackend profiler(cuda_backend());
  profiler.set_enabled(false);
  Cosmos3Transformer model = Cosmos3Transformer::load(ModelDirectory::open(folder), WeightCache::None, profiler);
  const ForwardOptions options{mode, mode, ActivationDType::BF16};
  for (int64_t tokens : o.tokens) {
    ForwardInputs cond = nano_inputs(shape, tokens, o.text, 1), uncond = nano_inputs(shape, tokens, o.text, 2);
    cuda::reset_peak_allocated_bytes();
    const std::size_t bytes = cond.latent.data.size() * sizeof(float);
    cuda::DeviceBuffer latent(bytes), velocity(bytes);
    latent.upload(cond.latent.data.data(), bytes);
    cond.latent.data.clear();
    uncond.latent.data.clear();
    const auto forward = [&](const ForwardInputs& in) {
      model.forward_resident(in, latent.as<float>(), velocity.as<float>(), options);
      float first = 0;  // waits for the backend's stream: the step's next operation needs the velocity
      model.backend().download(&first, velocity.data(), sizeof first);
    };
    auto start = Clock::now();
    forward(cond);  // uploads the weights (first token count only), makes the plans
    const double first_ms = ms_since(start);
    forward(uncond);
    std::vector<double> warm;
    for (int r = 0; r < o.reps; ++r) {
      start = Clock::now();
      forward(r % 2 ? uncond : cond);
      warm.push_back(ms_since(start));
    }
    model.understanding_cache().clear();
    start = Clock::now();
    forward(cond);
    const double cold_ms = ms_since(start);
    // The engine each layer's generation-stream attention ran on (the
    // vision rows over the text and vision keys; cuda_summary.py reads it).
    const AttentionProblem generation{tokens, o.text + tokens, shape.heads, shape.kv_heads, shape.head_dim, false};
    std::printf("{\"impl\": \"stepmix\", \"bench\": \"forward\", \"mode\": \"%s\", \"layers\": %lld, \"tokens\": %lld, "
                "\"text\": %lld, \"ms\": %.3f, \"samples\": %s, \"prefill_ms\": %.3f, \"first_ms\": %.3f, "
                "\"peak_device_bytes\": %zu, \"held_device_bytes\": %zu, \"attention\": \"%s\"}\n",
                mode_name.c_str(), (long long)layers, (long long)tokens, (long long)o.text, median(warm),
                list(warm).c_str(), std::max(0.0, cold_ms - median(warm)), first_ms, cuda::peak_allocated_bytes(),
                cuda::allocated_bytes(), cuda::attention_engine_name(cuda::attention_engine(generation)));
    std::fflush(stdout);
    if (o.profile) profile_forward(profiler, [&] { forward(cond); }, mode_name, layers, tokens);
    // A CFG step as the denoising loop makes it: the two passes one after
    // the other, and both in one batched call writing their own velocities.
    if (o.cfg_reps == 0) continue;
    cuda::DeviceBuffer velocity_uncond(bytes);
    const ForwardInputs* both[2] = {&cond, &uncond};
    float* const velocities[2] = {velocity.as<float>(), velocity_uncond.as<float>()};
    const auto batched = [&] {
      model.forward_resident(both, latent.as<float>(), velocities, options);
      float first = 0;
      model.backend().download(&first, velocity_uncond.data(), sizeof first);
    };
    batched();  // sizes the workspace for the stacked rows
    std::vector<double> separate_ms, batched_ms;
    for (int r = 0; r < o.cfg_reps; ++r) {
      start = Clock::now();
      forward(cond);
      forward(uncond);
      separate_ms.push_back(ms_since(start));
      start = Clock::now();
      batched();
      batched_ms.push_back(ms_since(start));
    }
    std::printf("{\"impl\": \"stepmix\", \"bench\": \"cfg_step\", \"mode\": \"%s\", \"layers\": %lld, "
                "\"tokens\": %lld, \"text\": %lld, \"separate_ms\": %.3f, \"batched_ms\": %.3f, "
                "\"separate_samples\": %s, \"batched_samples\": %s, \"peak_device_bytes\": %zu}\n",
                mode_name.c_str(), (long long)layers, (long long)tokens, (long long)o.text, median(separate_ms),
                median(batched_ms), list(separate_ms).c_str(), list(batched_ms).c_str(),
                cuda::peak_allocated_bytes());
    std::fflush(stdout);
  }
}

// The loop's own share of one denoising step on the device at this latent
// size: the CFG combination and a UniPC update (a second-order step with its
// corrector), timed on the stream.
void loop_step(const Options& o) {
  for (int64_t tokens : o.tokens) {
    const auto [T, H, W] = latent_of(tokens);
    const int64_t n = nano_shape(1, o.tiny).latent_channel * T * H * W;
    const std::size_t bytes = std::size_t(n) * sizeof(float);
    cuda::DeviceBuffer latent(bytes), v_cond(bytes), v_uncond(bytes), guided(bytes), history(4 * bytes);
    cuda::fill_uniform_f32(latent.as<float>(), n, 1, -1.0f, 1.0f, nullptr);
    cuda::fill_uniform_f32(v_cond.as<float>(), n, 2, -1.0f, 1.0f, nullptr);
    cuda::fill_uniform_f32(v_uncond.as<float>(), n, 3, -1.0f, 1.0f, nullptr);
    cuda::fill_zero(history.data(), 4 * bytes, nullptr);
    float* h = history.as<float>();
    sched::LatentHistory hist{h, h + n, h + 2 * n, h + 3 * n};
    sched::SchedulerConfig config;  // UniPC
    config.unipc.flow_shift = 10.0;
    auto scheduler = sched::make_scheduler(config);
    scheduler->set_timesteps(35);
    cuda::StreamTimer timer;
    std::vector<double> ms;
    for (int step = 0; step < 4; ++step) {
      const sched::LatentStep s = scheduler->begin_latent_step(scheduler->timesteps()[std::size_t(step)], std::size_t(n));
      timer.start(nullptr);
      cuda::cfg_combine(v_uncond.as<float>(), v_cond.as<float>(), n, 6.0f, guided.as<float>(), nullptr);
      cuda::unipc_step_f32(s.unipc, n, latent.as<float>(), guided.as<float>(), hist.x0_prev2, hist.x0_prev,
                           hist.x0_now, hist.last_sample, nullptr);
      ms.push_back(timer.stop_ms(nullptr));
      hist.advance();
    }
    std::printf("{\"impl\": \"stepmix\", \"bench\": \"loop_step\", \"tokens\": %lld, \"latent_values\": %lld, "
                "\"ms\": %.3f, \"samples\": %s}\n",
                (long long)tokens, (long long)n, median(ms), list(ms).c_str());
    std::fflush(stdout);
  }
}

int run(const Options& o) {
  const cuda::DeviceInfo info = cuda::require_device(0);
  const SyntheticModelShape nano = nano_shape(1, o.tiny);
  std::printf("{\"impl\": \"stepmix\", \"bench\": \"forward_info\", \"name\": \"%s\", \"build\": \"%s\", "
              "\"hidden\": %lld, \"ffn\": %lld, \"heads\": %lld, \"kv_heads\": %lld, \"head_dim\": %lld}\n",
              info.name.c_str(), cuda::build_info().c_str(), (long long)nano.hidden_size,
              (long long)nano.intermediate_size, (long long)nano.heads, (long long)nano.kv_heads,
              (long long)nano.head_dim);
  for (int64_t layers : o.layers) {
    const SyntheticModelShape shape = nano_shape(layers, o.tiny);
    const std::string base = model_folder(o, layers);
    for (const bool fp8 : {false, true}) {
      const std::string folder = base + (fp8 ? "/fp8" : "/bf16");
      if (std::filesystem::exists(folder + "/config.json")) continue;
      const auto start = Clock::now();
      write_synthetic_transformer(folder, shape, fp8, 20260901);
      std::fprintf(stderr, "wrote %s in %.1f s\n", folder.c_str(), ms_since(start) / 1000);
    }
    for (const auto& [name, mode] : {std::pair{"dense", Precision::BF16}, std::pair{"w8a16", Precision::W8A16},
                                     std::pair{"w8a8", Precision::W8A8}})
      bench::run_case("\"bench\": \"forward\", \"mode\": \"" + std::string(name) +
                          "\", \"layers\": " + std::to_string(layers),
                      [&] { time_model(o, layers, name, mode); });
  }
  bench::run_case("\"bench\": \"loop_step\"", [&] { loop_step(o); });
  return bench::failed_cases() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--dir" && has_value) o.dir = argv[++i];
    else if (a == "--layers" && has_value) o.layers = parse_list(argv[++i]);
    else if (a == "--tokens" && has_value) o.tokens = parse_list(argv[++i]);
    else if (a == "--text" && has_value) o.text = std::stoll(argv[++i]);
    else if (a == "--reps" && has_value) o.reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--cfg-reps" && has_value) o.cfg_reps = std::max(0, std::atoi(argv[++i]));
    else if (a == "--profile" && has_value) o.profile = std::atoi(argv[++i]) != 0;
    else if (a == "--tiny") o.tiny = true;
    else {
      std::fprintf(stderr, "usage: bench_cuda_forward --dir DIR [--layers 1,4] [--tokens 44160,1024] [--text 300] "
                           "[--reps 3] [--cfg-reps 1] [--profile 1] [--tiny]\n");
      return 2;
    }
  }
  if (o.dir.empty()) {
    std::fprintf(stderr, "bench_cuda_forward: --dir is required\n");
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_forward: %s\n", e.what());
    return 2;
  }
}
