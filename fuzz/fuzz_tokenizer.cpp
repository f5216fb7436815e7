// tokenizer.json either loads (and then encodes any text into ids below
// vocab_size) or fails with stepmix::Error.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "io/tokenizer.hpp"
#include "stepmix/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto tok = stepmix::Tokenizer::from_json_text(text, "fuzz/tokenizer.json");
    for (const char* prompt : {"a photo of an ankle boot", "T-shirt, top!", "<|im_end|><|vision_start|>", ""})
      for (int64_t id : tok.understanding_prefix(prompt))
        if (id < 0 || id >= tok.vocab_size()) std::abort();
  } catch (const stepmix::Error&) {
  }
  return 0;
}
