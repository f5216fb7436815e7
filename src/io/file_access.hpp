// Opening input files without trusting what the path names: the kind of file
// is checked on the open descriptor (no race between a check and the open),
// a FIFO cannot block the open, sizes are bounded before a byte is read, and
// messages say what is actually wrong ("no such file" only when there is no
// file; otherwise "permission denied", "is a directory", "is a FIFO", ...).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace stepmix {

// "a regular file", "a directory", "a FIFO", "a socket", "a block device",
// "a character device", "a symbolic link".
std::string file_type_phrase(mode_t mode);

// Why an open/stat of `path` failed with `error` (an errno): "no such file or
// directory" for ENOENT only, "permission denied", "a component of the path
// is not a directory", ... (lower-case, no trailing period).
std::string errno_phrase(int error);

// The problem with `path` as a file to read, or "" when it is a readable
// regular file: "cannot open: no such file or directory", "cannot open:
// permission denied", "not a regular file (a directory)", ...
std::string input_file_problem(const std::string& path);

// The contents of `path`, which must be a regular file of at most
// `max_bytes`. Opened with O_NONBLOCK, so a FIFO is refused instead of
// waiting for a writer, and /dev/zero is refused instead of read forever.
// Errors: stepmix::Error(component, "<prefix><path>: <problem>").
std::string read_regular_file(const std::string& path, std::uint64_t max_bytes, const std::string& component,
                              const std::string& prefix = "");

// Prompt files and other text inputs: read_regular_file, then the text must
// be UTF-8 without NUL bytes (a binary file given by mistake is named, with
// the byte offset). `what` names the input in messages, e.g. "--calib-prompts":
//   [input] --calib-prompts /dev/zero: not a regular file (a character device)
inline constexpr std::uint64_t kMaxTextFileBytes = 16ull << 20;
std::string read_text_file_bounded(const std::string& path, std::uint64_t max_bytes, const std::string& what);

// Offset of the first byte that is not part of valid UTF-8 (overlong forms,
// surrogates and code points above U+10FFFF are invalid), or npos.
std::size_t first_invalid_utf8(const std::string& text);

}  // namespace stepmix
