// Any byte string is either a valid safetensors file whose every view lies
// inside the buffer, or a stepmix::Error. Nothing else (no crash, no other
// exception, no out-of-bounds read).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz_entry.hpp"
#include "io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return stepmix::fuzz::run_fuzz_input(data, size, [](const uint8_t* bytes_in, std::size_t n) {
    auto file = stepmix::SafetensorsFile::parse_bytes("fuzz.safetensors", bytes_in, n);
    volatile unsigned sum = 0;
    for (const auto& [name, view] : file->tensors()) {
      // The shape accounts for every byte, and its int64 element count does
      // not overflow (UBSan checks the multiplications in numel()).
      if (uint64_t(view.numel()) * stepmix::dtype_size(view.dtype) != view.nbytes) std::abort();
      const auto* bytes = reinterpret_cast<const unsigned char*>(view.data);
      for (std::size_t i = 0; i < view.nbytes; ++i) sum = sum + bytes[i];  // ASan checks each read
    }
  });
}
