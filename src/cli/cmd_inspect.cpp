#include "cli/commands.h"

namespace ft::cli {

Command register_inspect(CLI::App& app) {
  auto* sub = app.add_subcommand("inspect", "(not implemented yet)");
  return {sub, [] { return 1; }};
}

}  // namespace ft::cli
