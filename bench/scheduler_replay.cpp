// Replays recorded model outputs through stepmix's schedulers, for the
// scheduler part of bench/run-diffusers-differential.sh: the reference
// (Diffusers' own scheduler file, bench/diffusers_scheduler_part.py) runs a
// closed loop with a toy model and records each step's model output and noise;
// stepmix steps the same latent with the same outputs, so the two trajectories
// differ only by the schedulers' arithmetic.
//
// usage: bench_scheduler_replay MANIFEST
// MANIFEST: one case per line, fields separated by tabs:
//   scheduler_config.json  N  overrides.json or -  in.bin  out.bin
// overrides.json: {"kind": "unipc"|"euler", "flow_shift": x, "use_karras_sigmas": b,
//                  "native_flow_grid": b, "set_sigmas": [...]} (set_sigmas: FlowMatch set_sigmas())
// in.bin : int64 numel, int32 n, int32 has_noise, float32 x[numel], v[n·numel], noise[n·numel] if has_noise
// out.bin: int32 steps, float32 sigmas[steps + 1], float64 timesteps[steps], float32 latents[steps·numel]
// stdout, one line per case in manifest order:
//   OK
//   REFUSED <stage>\t<message>   (stage: config, overrides, make, set_timesteps, step<k>)
// A refusal is an answer, not a failure: the exit status is 0 whenever every
// case got its line, so one process covers all the cases of a run.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sched/config.hpp"
#include "sched/flow_match_euler.hpp"
#include "stepmix/error.hpp"

namespace {

using namespace stepmix;
using namespace stepmix::sched;

struct Refusal {
  std::string stage, message;
};

struct Input {
  std::int64_t numel = 0;
  int steps = 0;
  std::vector<float> x, v, noise;
};

Input read_input(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  Input r;
  std::int32_t n = 0, has_noise = 0;
  in.read(reinterpret_cast<char*>(&r.numel), 8);
  in.read(reinterpret_cast<char*>(&n), 4);
  in.read(reinterpret_cast<char*>(&has_noise), 4);
  if (!in || r.numel <= 0 || n < 0) throw std::runtime_error(path + ": bad header");
  r.steps = n;
  const auto numel = std::size_t(r.numel);
  r.x.resize(numel);
  r.v.resize(numel * std::size_t(n));
  r.noise.resize(has_noise ? numel * std::size_t(n) : 0);
  in.read(reinterpret_cast<char*>(r.x.data()), std::streamsize(r.x.size() * 4));
  in.read(reinterpret_cast<char*>(r.v.data()), std::streamsize(r.v.size() * 4));
  in.read(reinterpret_cast<char*>(r.noise.data()), std::streamsize(r.noise.size() * 4));
  if (!in) throw std::runtime_error(path + ": short file");
  return r;
}

// Runs one case; a stepmix::Error at any stage is the case's answer.
void replay(const std::string& config_path, int steps, const std::string& overrides_path, const std::string& in_path,
            const std::string& out_path) {
  Input input = read_input(in_path);
  std::string stage = "config";
  try {
    SchedulerConfig cfg = load_scheduler_config(config_path);
    stage = "overrides";
    std::vector<double> set_sigmas;
    bool use_set_sigmas = false;
    if (overrides_path != "-") {
      std::ifstream f(overrides_path);
      const nlohmann::json j = nlohmann::json::parse(f);
      SchedulerOverrides ov;
      if (j.contains("kind"))
        ov.kind = j["kind"] == "euler" ? SchedulerKind::flow_match_euler : SchedulerKind::unipc_multistep;
      if (j.contains("flow_shift")) ov.flow_shift = j["flow_shift"].get<double>();
      if (j.contains("use_karras_sigmas")) ov.use_karras_sigmas = j["use_karras_sigmas"].get<bool>();
      if (j.contains("native_flow_grid")) ov.native_flow_grid = j["native_flow_grid"].get<bool>();
      if (j.contains("set_sigmas")) {
        use_set_sigmas = true;
        set_sigmas = j["set_sigmas"].get<std::vector<double>>();
      }
      apply_overrides(cfg, ov);
    }
    stage = "make";
    std::unique_ptr<Scheduler> sched = make_scheduler(cfg);
    stage = "set_timesteps";
    if (use_set_sigmas) {
      // The pipeline's explicit sigma list (FlowMatch's t_list) goes through set_sigmas.
      auto* fm = dynamic_cast<FlowMatchEulerDiscreteScheduler*>(sched.get());
      if (!fm) throw Error("replay", "set_sigmas needs FlowMatch Euler");
      fm->set_sigmas(set_sigmas);
    } else {
      sched->set_timesteps(steps);
    }
    const int n = sched->num_steps();
    if (n > input.steps)
      throw Error("replay", "the schedule has " + std::to_string(n) + " steps, the recording " +
                                std::to_string(input.steps));
    const auto numel = std::size_t(input.numel);
    if (!input.noise.empty())
      sched->set_noise_source([&input, numel](int k, std::span<float> out) {
        std::copy_n(input.noise.begin() + std::ptrdiff_t(std::size_t(k) * numel), numel, out.begin());
      });
    std::vector<float> latents;
    latents.reserve(numel * std::size_t(n));
    for (int k = 0; k < n; ++k) {
      stage = "step" + std::to_string(k);
      sched->step(std::span<const float>(input.v.data() + std::size_t(k) * numel, numel),
                  sched->timesteps()[std::size_t(k)], std::span<float>(input.x));
      latents.insert(latents.end(), input.x.begin(), input.x.end());
    }
    std::ofstream out(out_path, std::ios::binary);
    const std::int32_t n32 = n;
    out.write(reinterpret_cast<const char*>(&n32), 4);
    out.write(reinterpret_cast<const char*>(sched->sigmas().data()), std::streamsize(sched->sigmas().size() * 4));
    out.write(reinterpret_cast<const char*>(sched->timesteps().data()), std::streamsize(std::size_t(n) * 8));
    out.write(reinterpret_cast<const char*>(latents.data()), std::streamsize(latents.size() * 4));
    if (!out) throw std::runtime_error(out_path + ": cannot write");
  } catch (const Error& e) {
    throw Refusal{stage, e.what()};
  }
}

std::string one_line(std::string s) {
  for (char& c : s)  // the protocol is one line per case
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: bench_scheduler_replay MANIFEST\n");
    return 2;
  }
  std::ifstream manifest(argv[1]);
  if (!manifest) {
    std::fprintf(stderr, "bench_scheduler_replay: cannot read %s\n", argv[1]);
    return 2;
  }
  std::string line;
  while (std::getline(manifest, line)) {
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::stringstream fields(line);
    for (std::string s; std::getline(fields, s, '\t');) f.push_back(s);
    if (f.size() != 5) {
      std::fprintf(stderr, "bench_scheduler_replay: bad manifest line: %s\n", line.c_str());
      return 2;
    }
    try {
      replay(f[0], std::stoi(f[1]), f[2], f[3], f[4]);
      std::printf("OK\n");
    } catch (const Refusal& r) {
      std::printf("REFUSED %s\t%s\n", r.stage.c_str(), one_line(r.message).c_str());
    } catch (const std::exception& e) {  // a broken recording or output: the harness's fault, not stepmix's
      std::fprintf(stderr, "bench_scheduler_replay: %s\n", e.what());
      return 2;
    }
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}
