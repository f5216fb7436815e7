// scheduler/scheduler_config.json: parsing, construction and schedules of a
// few lengths either succeed or throw stepmix::Error. An accepted schedule
// has one timestep per step and one more sigma, and a run over a tiny latent
// steps through it without touching memory it does not own.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "fuzz_entry.hpp"
#include "sched/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace sched = stepmix::sched;
  return stepmix::fuzz::run_fuzz_json(data, size, [](const nlohmann::json& json) {
    const sched::SchedulerConfig config = sched::parse_scheduler_config(json, "fuzz/scheduler_config.json");
    auto scheduler = sched::make_scheduler(config);
    if (auto* euler = dynamic_cast<sched::FlowMatchEulerDiscreteScheduler*>(scheduler.get()))
      euler->set_noise_source([](int, std::span<float> out) {
        for (float& v : out) v = 0.5f;
      });
    for (int steps : {1, 2, 7, 35}) {
      // A rejected length (e.g. a fixed sigma list of another length) skips to the next.
      if (!stepmix::fuzz::run_stage([&] { scheduler->set_timesteps(steps); })) continue;
      if (scheduler->num_steps() != steps || scheduler->sigmas().size() != std::size_t(steps) + 1) std::abort();
      std::vector<float> sample(4, 1.0f), velocity(4, 0.25f);
      for (int i = 0; i < steps; ++i) scheduler->step(velocity, scheduler->timesteps()[std::size_t(i)], sample);
      if (!scheduler->finished()) std::abort();
    }
  });
}
