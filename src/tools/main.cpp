// stepmix command-line entry point. Every error that reaches here becomes one
// line on stderr and exit code 2; success is 0.
#include <cstdio>
#include <exception>
#include <string>

#include "stepmix/model.hpp"
#include "commands.hpp"

namespace {

// Keeps the one-line promise even for messages that embed newlines (e.g.
// JSON parse errors quoting their input).
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists: an output's temporary file or folder is removed
  // when a signal ends the process (src/io/temporary_outputs.hpp).
  stepmix::remove_temporary_outputs_on_fatal_signals();
  CLI::App app{"stepmix: Cosmos3 ModelOpt FP8 checkpoints with per-step W8A16/W8A8 precision"};
  app.set_version_flag("--version", std::string("stepmix ") + STEPMIX_VERSION);
  app.require_subcommand(1);
  stepmix::cli::add_inspect_command(app);
  stepmix::cli::add_forward_command(app);
  stepmix::cli::add_generate_command(app);
  stepmix::cli::add_quantize_command(app);
  stepmix::cli::add_compare_command(app);
  stepmix::cli::add_bench_command(app);
  stepmix::cli::add_vae_command(app);
  stepmix::cli::add_tokenize_command(app);
  stepmix::cli::add_prompt_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "stepmix: %s (see stepmix --help)\n", one_line(e.what()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stepmix: %s\n", one_line(e.what()).c_str());
    return 2;
  }
  return 0;
}
