#include "io/temporary_outputs.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>

#include "stepmix/error.hpp"

namespace stepmix {

namespace {

constexpr int kSlots = kMaxTemporaryOutputs;
constexpr std::size_t kMaxPath = 4096;
constexpr int kMaxDepth = 32;  // deeper folders are left (stepmix writes two levels)

// A registered path. state: 0 free, 1 being filled, 2 registered. The signal
// handler reads only slots in state 2 (acquire), after the path was written.
struct Slot {
  std::atomic<int> state{0};
  char path[kMaxPath];
};
Slot g_slots[kSlots];

// The kernel's getdents64 record (not exposed by glibc under this name).
struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];
};

bool is_dot_or_dotdot(const char* name) {
  return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

// Removes `name` under `dir_fd`: a file, or a folder and what it holds.
// Async-signal-safe: only openat, getdents64, lseek, unlinkat and close.
void remove_tree(int dir_fd, const char* name, int depth) {
  if (::unlinkat(dir_fd, name, 0) == 0 || errno == ENOENT) return;
  if (depth < kMaxDepth) {
    const int fd = ::openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      // Entries removed while reading may shift the rest: reread from the
      // start until a pass removes nothing.
      for (int pass = 0; pass < 64; ++pass) {
        bool removed = false;
        ::lseek(fd, 0, SEEK_SET);
        alignas(8) char buffer[2048];
        for (;;) {
          const long n = ::syscall(SYS_getdents64, fd, buffer, sizeof buffer);
          if (n <= 0) break;
          for (long offset = 0; offset < n;) {
            const auto* entry = reinterpret_cast<const LinuxDirent64*>(buffer + offset);
            offset += entry->d_reclen;
            if (is_dot_or_dotdot(entry->d_name)) continue;
            remove_tree(fd, entry->d_name, depth + 1);
            removed = true;
          }
        }
        if (!removed) break;
      }
      ::close(fd);
    }
  }
  ::unlinkat(dir_fd, name, AT_REMOVEDIR);
}

constexpr int kFatalSignals[] = {SIGTERM, SIGHUP, SIGQUIT, SIGINT};

}  // namespace

TemporaryOutput::TemporaryOutput(const std::string& path) {
  // Absolute, so that the handler does not depend on the working directory.
  const std::string absolute = std::filesystem::absolute(path).string();
  if (absolute.size() >= kMaxPath)
    throw Error("io", path + ": temporary output path is longer than " + std::to_string(kMaxPath - 1) + " bytes");
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (!g_slots[i].state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) continue;
    std::memcpy(g_slots[i].path, absolute.c_str(), absolute.size() + 1);
    g_slots[i].state.store(2, std::memory_order_release);
    slot_ = i;
    return;
  }
  throw Error("io", path + ": more than " + std::to_string(kSlots) + " temporary outputs at once");
}

TemporaryOutput::~TemporaryOutput() { g_slots[slot_].state.store(0, std::memory_order_release); }

// C linkage, internal to this file: what sigaction expects.
extern "C" {
static void remove_temporary_outputs_and_reraise(int signal_number) {
  const int saved_errno = errno;
  for (Slot& slot : g_slots)
    if (slot.state.load(std::memory_order_acquire) == 2) remove_tree(AT_FDCWD, slot.path, 0);
  // The signal is blocked while this runs; it is delivered again, with the
  // default action, as soon as the handler returns.
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
  errno = saved_errno;
}
}

void remove_temporary_outputs_on_fatal_signals() {
  for (int signal_number : kFatalSignals) {
    // A signal the process was started with ignored (nohup's SIGHUP, SIGINT
    // of a background job) stays ignored.
    struct sigaction current {};
    if (::sigaction(signal_number, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    struct sigaction action {};
    action.sa_handler = remove_temporary_outputs_and_reraise;
    sigemptyset(&action.sa_mask);
    for (int other : kFatalSignals) sigaddset(&action.sa_mask, other);  // one cleanup at a time
    ::sigaction(signal_number, &action, nullptr);
  }
}

FatalSignalsHeld::FatalSignalsHeld() {
  sigset_t fatal;
  sigemptyset(&fatal);
  for (int signal_number : kFatalSignals) sigaddset(&fatal, signal_number);
  pthread_sigmask(SIG_BLOCK, &fatal, &previous_);
}

FatalSignalsHeld::~FatalSignalsHeld() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

}  // namespace stepmix
