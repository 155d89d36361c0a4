// `ft bench`'s GB/token: the weight bytes one decode token reads, on a tiny qwen35moe model
// (Gated DeltaNet ssm_* tensors, a shared expert, routed experts): every tensor of the file
// counts, the routed experts at n_used / n_expert and the token embeddings at one row.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "format/gguf.h"
#include "model/model.h"
#include "subprocess.h"
#include "testgen/model_gen.h"

namespace fs = std::filesystem;

namespace {

TEST(CliBench, GbPerTokenCountsEveryTensorRead) {
  const fs::path dir = fs::path(FT_BINARY_DIR) / "test-tmp" / ("cli-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "q35moe.gguf").string();
  ft::testgen::generate_model(ft::testgen::preset("tiny", ft::testgen::Arch::kQwen35Moe), path);
  const auto m = ft::model::load_model(path);
  ASSERT_GT(m->hp.n_expert, 0);

  // The file's tensor bytes, less what a token does not read.
  double all = 0, exps = 0, embd = 0, embd_row = 0, ssm = 0, shexp = 0;
  bool tied = true;
  for (const ft::gguf::TensorInfo& t : m->file->tensors()) {
    const double n = static_cast<double>(t.nbytes);
    all += n;
    if (t.name.find("_exps") != std::string::npos) exps += n;
    if (t.name.find(".ssm_") != std::string::npos) ssm += n;
    if (t.name.find("_shexp") != std::string::npos) shexp += n;
    if (t.name == "token_embd.weight") embd = n, embd_row = n / static_cast<double>(t.ne[1]);
    if (t.name == "output.weight") tied = false;
  }
  ASSERT_GT(exps, 0);
  ASSERT_GT(ssm, 0) << "no Gated DeltaNet tensors in the model";
  ASSERT_GT(shexp, 0) << "no shared expert in the model";
  const double used = static_cast<double>(m->hp.n_expert_used[0]) / static_cast<double>(m->hp.n_expert);
  for (int64_t n_used : m->hp.n_expert_used) ASSERT_EQ(n_used, m->hp.n_expert_used[0]);
  const double want = all - exps * (1.0 - used) - (tied ? -embd_row : embd - embd_row);

  const auto r = ft::test::run_command(std::string(FT_BINARY_DIR) + "/ft bench -m " + path +
                                           " --device cpu -p 0 -n 1 -r 1 --threads 1 --json",
                                       (dir / "bench").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array() && j.size() == 1) << r.out;
  const double gb = j[0]["gb_per_token"].get<double>();
  EXPECT_NEAR(gb * 1e9, want, want * 1e-9) << "ssm " << ssm << " B, shexp " << shexp << " B";
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
