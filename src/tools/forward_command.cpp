#include "tools/commands.hpp"

namespace stepmix::cli {

void add_forward_command(CLI::App& app) {}

}  // namespace stepmix::cli
