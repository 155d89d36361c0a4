// Each `ft` subcommand lives in its own cmd_*.cpp and registers itself here.
// A command's run function returns the process exit code; ft::Error escaping it
// becomes a one-line message and exit code 2 (see main.cpp).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace ft::cli {

using RunFn = std::function<int()>;

struct Command {
  CLI::App* sub = nullptr;  // the subcommand added to the app
  RunFn run;                // runs it once parsed
};

Command register_inspect(CLI::App& app);
Command register_generate(CLI::App& app);
Command register_bench(CLI::App& app);
Command register_serve(CLI::App& app);
Command register_bench_serve(CLI::App& app);
Command register_bench_bw(CLI::App& app);
Command register_convert(CLI::App& app);
Command register_shell(CLI::App& app);

}  // namespace ft::cli
