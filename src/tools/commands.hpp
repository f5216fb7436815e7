// Sub-commands of the `stepmix` CLI; each lives in its own file and adds
// itself to the app. Errors thrown from a command's run become one line on
// stderr and exit code 2 (main.cpp).
#pragma once

#include <CLI/CLI.hpp>

namespace stepmix::cli {

void add_inspect_command(CLI::App& app);
void add_forward_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_vae_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_prompt_command(CLI::App& app);

}  // namespace stepmix::cli
