// FT_DEBUG_SKIP=link[,link..] (a diagnostic: the tokens are garbage): one-token decode steps
// without those launches, so that a step's time with and without a link is what that link costs
// inside the chain (PDL overlap included), which serialised kernel times do not tell. Links:
// norm1 qkv attn wo norm2 gateup swiglu down (dense), router experts (MoE), and inside the fused
// MoE experts: route (the gate|up launch keeps the ids buffer's experts instead of routing:
// slot j = expert j, GpuBuffers' initial ids, as no step routes), moe_swiglu, route_ids (the
// gate|up launch routes but reads the ids buffer's experts: the routing's own cost, the same bytes
// read), route_few (it routes, then slot j takes expert j or j + 8 by the routed id's parity: the
// experts change within 16 a layer). Session 22 ran route and route_ids on an uninitialised ids
// buffer (zeros: expert 0 eight times, mostly from L2) and read the difference to real routing as
// the cost of changing experts; session 23's read probe (tools/bench_tlb_cuda.cu) puts that at
// ~0.1 us a launch.
#pragma once

#include <cstdint>

namespace ft::gpu::debug {

enum SkipLink : unsigned {
  kSkipNorm1 = 1, kSkipQkv = 2, kSkipAttn = 4, kSkipWo = 8, kSkipNorm2 = 16, kSkipGateUp = 32,
  kSkipSwiglu = 64, kSkipDown = 128, kSkipRouter = 256, kSkipExperts = 512, kSkipRoute = 1024,
  kSkipMoeSwiglu = 2048, kSkipRouteIds = 4096, kSkipRouteFew = 8192
};

// Whether a one-token step (n_tok == 1) leaves out `link` (FT_DEBUG_SKIP, read once).
bool skip(unsigned link, int64_t n_tok);

}  // namespace ft::gpu::debug
