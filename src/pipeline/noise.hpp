// Seeded standard-normal noise for the initial latent. stepmix's own
// generator (xoshiro256** seeded through splitmix64, Box–Muller in double):
// the same seed gives the same bits on every run and machine with the same
// libm. Bit-parity with PyTorch's generator is not a goal;
// parity tests pass the noise in a file instead.
#pragma once

#include <cstdint>
#include <vector>

namespace stepmix {

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

}  // namespace stepmix
