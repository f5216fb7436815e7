#include "pipeline/noise.hpp"

#include <cmath>
#include <numbers>
#include <span>

#include "sched/scheduler.hpp"

namespace stepmix {
namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

NormalGenerator::NormalGenerator(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t NormalGenerator::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double NormalGenerator::next_uniform() {
  // 53 random bits, shifted off zero so log() is finite.
  return (double(next_u64() >> 11) + 0.5) * 0x1p-53;
}

float NormalGenerator::next_normal() {
  if (has_spare_) {
    has_spare_ = false;
    return float(spare_);
  }
  const double r = std::sqrt(-2.0 * std::log(next_uniform()));
  const double theta = 2.0 * std::numbers::pi * next_uniform();
  spare_ = r * std::sin(theta);
  has_spare_ = true;
  return float(r * std::cos(theta));
}

std::vector<float> NormalGenerator::normals(std::size_t n) {
  std::vector<float> out(n);
  for (auto& v : out) v = next_normal();
  return out;
}

void draw_step_noise_from(sched::Scheduler& scheduler, std::shared_ptr<NormalGenerator> generator) {
  scheduler.set_noise_source([generator = std::move(generator)](int, std::span<float> out) {
    for (float& v : out) v = generator->next_normal();
  });
}

}  // namespace stepmix
