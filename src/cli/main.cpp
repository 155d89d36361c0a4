// ft: the FreeToken command line.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"FreeToken: an edge-native LLM engine for GGUF models"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for all subcommands");

  const std::vector<ft::cli::Command> cmds = {
      ft::cli::register_inspect(app),
      ft::cli::register_generate(app),
      ft::cli::register_bench(app),
      ft::cli::register_serve(app),
      ft::cli::register_bench_serve(app),
      ft::cli::register_bench_bw(app),
      ft::cli::register_convert(app),
      ft::cli::register_shell(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "ft: %s\n", e.what());
    std::fprintf(stderr, "Run with --help for usage.\n");
    return 2;
  }
  try {
    for (const auto& c : cmds)
      if (c.sub->parsed()) return c.run();
  } catch (const ft::Error& e) {
    std::fprintf(stderr, "ft: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ft: error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ft: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
