// stepmix command-line entry point. Every error that reaches here becomes one
// line on stderr and exit code 2; success is 0.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <string>

#include "stepmix/model.hpp"
#include "commands.hpp"
#include "options.hpp"

namespace {

// Keeps the one-line promise even for messages that embed newlines (e.g.
// JSON parse errors quoting their input).
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// "--seed=" with nothing after '=' would make the parser take the next word
// as the value (or report a confusing count); it is an empty value.
const char* empty_assigned_option(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") return nullptr;
    if (a.size() > 3 && a.compare(0, 2, "--") == 0 && a.back() == '=' &&
        a.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-", 2) == a.size() - 1)
      return argv[i];
  }
  return nullptr;
}

// "(see stepmix generate --help)": the help of the command the words name,
// followed from argv as far as they are subcommands (stepmix vae decode).
std::string help_hint(CLI::App& app, int argc, char** argv) {
  std::string words = "stepmix";
  CLI::App* command = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    const auto named = command->get_subcommands([&](CLI::App* s) { return s->get_name() == word; });
    if (named.empty()) break;
    CLI::App* sub = named.front();
    command = sub;
    words += " " + command->get_name();
  }
  return "(see " + words + " --help)";
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists: an output's temporary file or folder is removed
  // when a signal ends the process (src/io/temporary_outputs.hpp).
  stepmix::remove_temporary_outputs_on_fatal_signals();
  CLI::App app{"stepmix: Cosmos3 ModelOpt FP8 checkpoints with per-step W8A16/W8A8 precision"};
  app.set_version_flag("--version", std::string("stepmix ") + STEPMIX_VERSION);
  app.require_subcommand(1);
  // In every command a later occurrence of an option wins, so scripts can
  // append overrides (subcommands inherit their parent's option defaults).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  stepmix::cli::add_inspect_command(app);
  stepmix::cli::add_forward_command(app);
  stepmix::cli::add_generate_command(app);
  stepmix::cli::add_quantize_command(app);
  stepmix::cli::add_compare_command(app);
  stepmix::cli::add_bench_command(app);
  stepmix::cli::add_vae_command(app);
  stepmix::cli::add_tokenize_command(app);
  stepmix::cli::add_prompt_command(app);
  stepmix::cli::require_decimal_numbers(app);
  if (const char* opt = empty_assigned_option(argc, argv)) {
    const std::string name(opt, std::string(opt).size() - 1);
    std::fprintf(stderr, "stepmix: %s: empty value %s\n", one_line(name).c_str(), help_hint(app, argc, argv).c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A first word that is no command is no "missing subcommand".
    if (app.get_subcommands().empty() && argc > 1 && argv[1][0] != '-')
      std::fprintf(stderr,
                   "stepmix: unknown command '%s' (expected inspect, generate, forward, quantize, compare, "
                   "bench, vae, tokenize or prompt; see stepmix --help)\n",
                   one_line(argv[1]).c_str());
    else
      std::fprintf(stderr, "stepmix: %s %s\n", one_line(e.what()).c_str(), help_hint(app, argc, argv).c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "stepmix: [memory] out of memory: the request needs more than this machine can give "
                         "(try fewer steps, frames or pixels); nothing was written\n");
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    std::fprintf(stderr, "stepmix: [file] %s: %s\n", one_line(e.path1().string()).c_str(),
                 one_line(e.code().message()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stepmix: %s\n", one_line(e.what()).c_str());
    return 2;
  }
  return 0;
}
