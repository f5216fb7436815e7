// Outputs are written under a temporary name (a file, or a folder of files)
// and renamed into place, so the destination is never partial. This keeps the
// promise for the temporary itself: while a TemporaryOutput is alive its path
// is registered, and a fatal signal (SIGTERM, SIGHUP, SIGQUIT, SIGINT when the
// command has not taken it over) removes every registered path before the
// process dies of that signal. Without it a signal landing during the final
// write left "<out>.tmp.<pid>" behind.
#pragma once

#include <csignal>
#include <string>

namespace stepmix {

// How many paths may be registered at once (an output set stages one per
// output, plus one old folder being removed).
inline constexpr int kMaxTemporaryOutputs = 64;

// Registers `path` (a file or a folder, which may not exist yet) for removal
// on a fatal signal, until destruction. Not copyable. At most
// kMaxTemporaryOutputs at a time (more throws stepmix::Error); paths longer
// than 4095 bytes are refused too.
class TemporaryOutput {
 public:
  explicit TemporaryOutput(const std::string& path);
  ~TemporaryOutput();
  TemporaryOutput(const TemporaryOutput&) = delete;
  TemporaryOutput& operator=(const TemporaryOutput&) = delete;

 private:
  int slot_;
};

// Installs the removing handler for SIGTERM, SIGHUP, SIGQUIT and SIGINT
// (except those the process was started with ignored, as under nohup). The
// handler removes the registered paths (async-signal-safe: unlinkat and
// getdents64 only), restores the default action and re-raises the signal, so
// the exit status still says which signal ended the process.
// A command that takes SIGINT over for a while (generate and compare cancel
// the run on the first Ctrl-C) restores this handler before it writes.
void remove_temporary_outputs_on_fatal_signals();

// Holds off those four signals on the calling thread while alive (pool
// threads block them for good), so that a short sequence of renames is not
// cut in the middle; a signal that arrives meanwhile is delivered when the
// mask is restored.
class FatalSignalsHeld {
 public:
  FatalSignalsHeld();
  ~FatalSignalsHeld();
  FatalSignalsHeld(const FatalSignalsHeld&) = delete;
  FatalSignalsHeld& operator=(const FatalSignalsHeld&) = delete;

 private:
  sigset_t previous_;  // the caller's mask, restored on destruction
};

}  // namespace stepmix
