// FT_DEBUG_SKIP=link[,link..] (a diagnostic: the tokens are garbage): one-token decode steps
// without those launches, so that a step's time with and without a link is what that link costs
// inside the chain (PDL overlap included), which serialised kernel times do not tell. Links:
// norm1 qkv attn wo norm2 gateup swiglu down (dense), router experts (MoE), and inside the fused
// MoE experts: route (the gate|up launch keeps the last ids instead of routing), moe_swiglu,
// route_ids (the gate|up launch routes but reads the experts of the last ids: the routing's own
// cost without the experts changing from step to step), route_few (it routes, then slot j takes
// expert j or j + 8 by the routed id's parity: the experts change within 16 a layer -- a TLB
// reach probe).
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
