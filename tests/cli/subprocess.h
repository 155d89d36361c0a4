// Runs a command line through /bin/sh and captures its exit status, stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace ft::test {

struct RunResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline RunResult run_command(const std::string& cmd, const std::string& tmp_prefix) {
  const std::string out = tmp_prefix + ".out", err = tmp_prefix + ".err";
  const std::string full = cmd + " >" + out + " 2>" + err + " </dev/null";
  const int st = std::system(full.c_str());
  RunResult r;
  if (WIFEXITED(st)) {
    r.exit_code = WEXITSTATUS(st);
    // sh reports a child killed by signal N as exit status 128+N
    if (r.exit_code > 128 && r.exit_code < 160) r.signal = r.exit_code - 128;
  } else if (WIFSIGNALED(st)) {
    r.signal = WTERMSIG(st);
  }
  r.out = slurp(out);
  r.err = slurp(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

}  // namespace ft::test
