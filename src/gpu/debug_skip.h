// FT_DEBUG_SKIP=link[,link..] (a diagnostic: the tokens are garbage): one-token decode steps
// without those launches, so that a step's time with and without a link is what that link costs
// inside the chain (PDL overlap included), which serialised kernel times do not tell. Links:
// norm1 qkv attn wo norm2 gateup swiglu down (dense), router experts (MoE), and inside the fused
// MoE experts: route (the gate|up launch keeps the ids buffer's experts instead of routing:
// slot j = expert j, GpuBuffers' initial ids, as no step routes) and moe_swiglu. (Sessions 22-23
// also had route_ids -- routing on fixed experts -- and route_few -- experts within 16 a layer;
// session 23 found both as fast as real routing once the ids buffer was initialised, i.e. changing
// experts costs nothing measurable, and removed them: benches/h200.md, session 23.)
#pragma once

#include <cstdint>

namespace ft::gpu::debug {

enum SkipLink : unsigned {
  kSkipNorm1 = 1, kSkipQkv = 2, kSkipAttn = 4, kSkipWo = 8, kSkipNorm2 = 16, kSkipGateUp = 32,
  kSkipSwiglu = 64, kSkipDown = 128, kSkipRouter = 256, kSkipExperts = 512, kSkipRoute = 1024,
  kSkipMoeSwiglu = 2048
};

// Whether a one-token step (n_tok == 1) leaves out `link` (FT_DEBUG_SKIP, read once).
bool skip(unsigned link, int64_t n_tok);

// FT_DEBUG_SPACER=link[,link..] (a diagnostic; the same tokens): one-token steps launch an empty
// one-warp kernel (cuda/pdl_spacer.h) right before each named link, so that link's launch is
// released only once the launch before it has completed instead of under it (PDL).
bool spacer(unsigned link, int64_t n_tok);

}  // namespace ft::gpu::debug
