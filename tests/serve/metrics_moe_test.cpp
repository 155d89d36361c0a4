// /metrics' MoE expert-cache lines (serve/metrics.h): rendered from the gauges the server
// fills from the runner (offload-family GPU backends), absent for other runners.
#include <gtest/gtest.h>

#include <string>

#include "serve/metrics.h"

namespace {

TEST(MetricsMoeCache, RenderedOnlyWhenPresent) {
  ft::serve::Metrics m;
  ft::serve::EngineGauges g;
  std::string out = m.render(g);
  EXPECT_EQ(out.find("ft_moe_cache"), std::string::npos) << out;

  g.moe.present = true;
  g.moe.slots = 3072;
  g.moe.slots_used = 3000;
  g.moe.routes = 800;
  g.moe.hits = 600;
  g.moe.misses_fetched = 190;
  g.moe.misses_cpu = 7;
  out = m.render(g);
  for (const char* line : {"ft_moe_cache_slots 3072\n", "ft_moe_cache_slots_used 3000\n",
                           "ft_moe_cache_routes_total 800\n", "ft_moe_cache_hits_total 600\n",
                           "ft_moe_cache_misses_fetched_total 190\n", "ft_moe_cache_misses_cpu_total 7\n",
                           "ft_moe_cache_hit_ratio 0.750000\n", "# TYPE ft_moe_cache_hits_total counter\n",
                           "# TYPE ft_moe_cache_slots_used gauge\n"})
    EXPECT_NE(out.find(line), std::string::npos) << line << " missing in\n" << out;
}

}  // namespace
