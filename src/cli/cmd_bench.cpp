#include "cli/commands.h"

namespace ft::cli {

Command register_bench(CLI::App& app) {
  auto* sub = app.add_subcommand("bench", "(not implemented yet)");
  return {sub, [] { return 1; }};
}

}  // namespace ft::cli
