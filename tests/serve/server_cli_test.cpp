// `ft serve` as people run it: the ready line names the address, the endpoints answer,
// SIGTERM stops it with exit code 0, and a bad model or a taken port is a one-line error
// with exit code 2.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "../cli/subprocess.h"
#include "server_test_util.h"

namespace ft::test {
namespace {

const std::string kFt = std::string(FT_BINARY_DIR) + "/ft";

struct Spawned {
  pid_t pid = -1;
  std::string log;  // stderr goes here
};

Spawned spawn_serve(const std::string& args, const std::string& log) {
  Spawned s;
  s.log = log;
  s.pid = fork();
  if (s.pid == 0) {
    const std::string cmd = "exec " + kFt + " serve " + args + " 2>" + log + " >/dev/null </dev/null";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return s;
}

// Waits for "ready on http://HOST:PORT" in the log; returns the port or 0.
int wait_ready(const Spawned& s) {
  // (std::regex trips GCC 12's maybe-uninitialized warning under ASan: plain search.)
  const std::string ready = "ready on http://127.0.0.1:";
  for (int i = 0; i < 1000; ++i) {
    const std::string log = slurp(s.log);
    const size_t at = log.find(ready);
    if (at != std::string::npos) return std::atoi(log.c_str() + at + ready.size());
    int st = 0;
    if (waitpid(s.pid, &st, WNOHANG) == s.pid) {
      ADD_FAILURE() << "ft serve exited early: " << log;
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "no ready line: " << slurp(s.log);
  return 0;
}

// SIGTERM, then the exit status within 10 s (-1 if it did not exit).
int stop(const Spawned& s) {
  kill(s.pid, SIGTERM);
  for (int i = 0; i < 1000; ++i) {
    int st = 0;
    if (waitpid(s.pid, &st, WNOHANG) == s.pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(s.pid, SIGKILL);
  waitpid(s.pid, nullptr, 0);
  return -1;
}

TEST(ServerCli, ServesAndStopsOnSigterm) {
  ASSERT_TRUE(std::filesystem::exists(kFt)) << "build the ft target first: " << kFt;
  const auto s = spawn_serve("--model " + tiny_model_path() + " --port 0 --threads 1 --alias tiny",
                             serve_tmp_dir() + "/serve.log");
  const int port = wait_ready(s);
  ASSERT_GT(port, 0);
  httplib::Client c("127.0.0.1", port);
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(json::parse(m->body)["data"][0]["id"], "tiny");
  auto r = c.Post("/completion", R"({"prompt": [1, 2, 3], "n_predict": 4, "ignore_eos": true})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["tokens_predicted"], 4);
  EXPECT_EQ(stop(s), 0) << slurp(s.log);
  EXPECT_NE(slurp(s.log).find("listening on http://127.0.0.1:"), std::string::npos);
}

TEST(ServerCli, ApiKeyFromTheCommandLine) {
  const auto s = spawn_serve("--model " + tiny_model_path() + " --port 0 --threads 1 --api-key k1",
                             serve_tmp_dir() + "/serve-key.log");
  const int port = wait_ready(s);
  ASSERT_GT(port, 0);
  httplib::Client c("127.0.0.1", port);
  EXPECT_EQ(c.Post("/tokenize", R"({"content": "a"})", "application/json")->status, 401);
  EXPECT_EQ(c.Post("/tokenize", {{"Authorization", "Bearer k1"}}, R"({"content": "a"})", "application/json")->status, 200);
  EXPECT_EQ(stop(s), 0);
}

TEST(ServerCli, BadModelAndTakenPort) {
  const auto bad = run_command("timeout 20 " + kFt + " serve --model /nonexistent.gguf --port 0", serve_tmp_dir() + "/bad");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("/nonexistent.gguf"), std::string::npos) << bad.err;

  const auto s = spawn_serve("--model " + tiny_model_path() + " --port 0 --threads 1", serve_tmp_dir() + "/serve-a.log");
  const int port = wait_ready(s);
  ASSERT_GT(port, 0);
  const auto taken = run_command("timeout 20 " + kFt + " serve --model " + tiny_model_path() + " --port " + std::to_string(port),
                                 serve_tmp_dir() + "/taken");
  EXPECT_EQ(taken.exit_code, 2);
  EXPECT_NE(taken.err.find("cannot listen on 127.0.0.1:" + std::to_string(port)), std::string::npos) << taken.err;
  EXPECT_EQ(stop(s), 0);
}

}  // namespace
}  // namespace ft::test
