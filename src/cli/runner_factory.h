// Builds the engine::Runner for --device (and --moe-backend, --dtype): the CPU engine or,
// in builds with the CUDA backend, the GPU session. `auto` picks cuda when a GPU answers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/runner.h"

namespace ft::model {
struct Model;
}

namespace ft::cli {

struct RunnerOptions {
  std::string device = "auto";       // auto | cpu | cuda
  std::string moe_backend = "auto";  // auto | fused (cuda) | cpu (cpu)
  std::string dtype = "auto";
  int64_t n_ctx = 0;
  int threads = 0;
  std::function<void(uint64_t, uint64_t)> progress;  // weight upload (cuda)
};

// "cpu" or "cuda"; throws for an unknown or unavailable device.
std::string resolve_device(const std::string& device);

std::unique_ptr<engine::Runner> make_runner(const model::Model& m, const RunnerOptions& o);

}  // namespace ft::cli
