#include "cli/commands.h"

namespace ft::cli {

Command register_generate(CLI::App& app) {
  auto* sub = app.add_subcommand("generate", "(not implemented yet)");
  return {sub, [] { return 1; }};
}

}  // namespace ft::cli
