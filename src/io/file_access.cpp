#include "io/file_access.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "stepmix/error.hpp"

namespace stepmix {

std::string file_type_phrase(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

std::string errno_phrase(int error) {
  switch (error) {
    case ENOENT: return "no such file or directory";
    case EACCES:
    case EPERM: return "permission denied";
    case ENOTDIR: return "a component of the path is not a directory";
    case ELOOP: return "too many levels of symbolic links";
    case ENAMETOOLONG: return "file name too long";
    case EISDIR: return "is a directory";
    case EROFS: return "read-only file system";
    case ENOSPC: return "no space left on the device";
    case EDQUOT: return "disk quota exceeded";
    case ENXIO: return "no such device or address";
    default: break;
  }
  std::string text = std::strerror(error);
  if (!text.empty()) text[0] = char(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

namespace {

// Opens `path` for reading and checks that it is a regular file; returns the
// descriptor and fills `st`, or returns -1 and sets `problem`.
int open_regular(const std::string& path, struct stat& st, std::string& problem) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    problem = "cannot open: " + errno_phrase(errno);
    return -1;
  }
  if (::fstat(fd, &st) != 0) {
    problem = "cannot stat: " + errno_phrase(errno);
    ::close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file (" + file_type_phrase(st.st_mode) + ")";
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

std::string input_file_problem(const std::string& path) {
  struct stat st {};
  std::string problem;
  const int fd = open_regular(path, st, problem);
  if (fd >= 0) ::close(fd);
  return problem;
}

std::string read_regular_file(const std::string& path, std::uint64_t max_bytes, const std::string& component,
                              const std::string& prefix) {
  struct stat st {};
  std::string problem;
  const int fd = open_regular(path, st, problem);
  if (fd < 0) throw Error(component, prefix + path + ": " + problem);
  const auto size = std::uint64_t(st.st_size);
  if (size > max_bytes) {
    ::close(fd);
    throw Error(component, prefix + path + ": file is " + std::to_string(size) + " bytes, more than the limit of " +
                               std::to_string(max_bytes) + " bytes");
  }
  std::string text(std::size_t(size), '\0');
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      throw Error(component, prefix + path + ": read failed: " + errno_phrase(error));
    }
    if (n == 0) break;  // the file shrank since fstat: read as far as it goes
    done += std::size_t(n);
  }
  ::close(fd);
  text.resize(done);
  return text;
}

std::size_t first_invalid_utf8(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (std::size_t i = 0; i < text.size();) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    const std::size_t length = detail::utf8_sequence_length(s + i, text.size() - i);
    if (length == 0) return i;
    i += length;
  }
  return std::string::npos;
}

std::string read_text_file_bounded(const std::string& path, std::uint64_t max_bytes, const std::string& what) {
  const std::string prefix = what.empty() ? "" : what + " ";
  std::string text = read_regular_file(path, max_bytes, "input", prefix);
  if (const std::size_t nul = text.find('\0'); nul != std::string::npos)
    throw Error("input", prefix + path + ": NUL byte at offset " + std::to_string(nul) +
                             "; expected a text file (UTF-8)");
  if (const std::size_t bad = first_invalid_utf8(text); bad != std::string::npos)
    throw Error("input", prefix + path + ": byte " + std::to_string(bad) + " is not valid UTF-8; expected a text file");
  return text;
}

}  // namespace stepmix
