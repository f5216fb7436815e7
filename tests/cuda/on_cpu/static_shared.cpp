// The checks of static __shared__ arrays (static_shared.hpp).
#include "static_shared.hpp"

#include <cstring>
#include <string>

#include "simt_emulator.hpp"

namespace stepmix::simt {

void SharedArrayChecks::access(void* data, std::size_t element_bytes, std::size_t count, int64_t index, bool store) {
  const SharedAccessPoint at = shared_access_point();
  if (at.block_serial != block_serial_) {  // the first access of a new block
    block_serial_ = at.block_serial;
    std::memset(data, 0xA5, element_bytes * count);
    hazards_.reset(count, at.block_dimensions.x, at.block_dimensions.y,
                   "a static __shared__ array of " + std::to_string(count) + " elements of " +
                       std::to_string(element_bytes) + " bytes");
  }
  if (index < 0 || uint64_t(index) >= count)
    fail((store ? "stores index " : "loads index ") + std::to_string(index) + " outside a static __shared__ array of " +
         std::to_string(count) + " elements");
  if (!at.check_races) return;
  const std::string race = store ? hazards_.store(std::size_t(index), at.thread, at.interval)
                                 : hazards_.load(std::size_t(index), at.thread, at.interval);
  if (!race.empty()) fail(race);
}

}  // namespace stepmix::simt
