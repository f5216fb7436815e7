// tokenizer.json either loads (and then encodes any text into ids below
// vocab_size, which decode back without error) or fails with stepmix::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_entry.hpp"
#include "text/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return stepmix::fuzz::run_fuzz_input(data, size, [](const uint8_t* bytes, std::size_t n) {
    const std::string text(stepmix::fuzz::input_text(bytes, n));
    const auto tok = stepmix::text::Tokenizer::from_json_text(text, "fuzz/tokenizer.json");
    for (const char* prompt : {"a photo of an ankle boot", "T-shirt, top!", "<|im_end|><|vision_start|>", "caf\xC3\xA9 12", ""}) {
      const auto ids = tok.encode(prompt);
      for (int64_t id : ids)
        if (id < 0 || id >= tok.vocab_size()) std::abort();
      tok.decode(ids, false);
      tok.decode(ids, true);
    }
  });
}
