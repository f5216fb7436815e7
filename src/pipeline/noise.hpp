// Seeded standard-normal noise for the initial latent. stepmix's own
// generator (xoshiro256** seeded through splitmix64, Box–Muller in double):
// the same seed gives the same bits on every run and machine with the same
// libm. Bit-parity with PyTorch's generator is not a goal;
// parity tests pass the noise in a file instead.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace stepmix {
namespace sched {
class Scheduler;
}

class NormalGenerator {
 public:
  explicit NormalGenerator(uint64_t seed);
  double next_uniform();  // (0, 1)
  float next_normal();
  std::vector<float> normals(std::size_t n);

 private:
  uint64_t next_u64();
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0;
};

// A scheduler that draws fresh noise on every step (FlowMatch Euler's
// stochastic mode, the distilled builds) takes it from `generator`, which
// continues the stream the initial noise came from: one seed, one run.
// Other schedulers ignore the source (Scheduler::set_noise_source).
void draw_step_noise_from(sched::Scheduler& scheduler, std::shared_ptr<NormalGenerator> generator);

}  // namespace stepmix
