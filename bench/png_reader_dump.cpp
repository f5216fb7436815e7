// Dumps what stepmix::read_png_rgb reads from each PNG named on the command
// line, for bench/png_pillow_check.py (run by bench/run-png-pillow.sh), which
// compares it byte for byte with Pillow's Image.open(f).convert("RGB").
//
// usage: bench_png_reader FILE...
// One line per file, in argument order:
//   OK <width> <height> <channels> <pixels as lowercase hex, row-major>
//   ERR <the exception's message, newlines turned into spaces>
// A refusal is an answer, not a failure: the exit status is 0 whenever every
// file got its line, so one process call covers all the generated files.
#include <cstdio>
#include <exception>
#include <string>

#include "io/png.hpp"

namespace {

void print_image(const stepmix::Image8& image) {
  static const char digits[] = "0123456789abcdef";
  std::string line = "OK " + std::to_string(image.width) + " " + std::to_string(image.height) + " " +
                     std::to_string(image.channels) + " ";
  line.reserve(line.size() + 2 * image.pixels.size() + 1);
  for (uint8_t byte : image.pixels) {
    line += digits[byte >> 4];
    line += digits[byte & 15];
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
}

void print_error(const std::exception& e) {
  std::string message = e.what();
  for (char& c : message)  // the reader's messages may span lines; the protocol is one line per file
    if (c == '\n' || c == '\r') c = ' ';
  std::printf("ERR %s\n", message.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    try {
      print_image(stepmix::read_png_rgb(argv[i]));
    } catch (const std::exception& e) {
      print_error(e);
    }
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}
