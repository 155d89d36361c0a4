// The host side of programmatic dependent launch's early triggers (cuda/pdl.cuh has the device
// side and the launch contract): which kernel classes trigger before their wait, and whether a
// pre-wait read across some launches stays ordered. Host code includes this, not pdl.cuh.
#pragma once

#include <initializer_list>

namespace ft::cuda {

// Early triggers (FT_PDL_EARLY=MASK, pdl.cpp): a kernel of a class in the mask calls pdl_trigger()
// before its wait instead of after it, so its dependent launches while it is still parked and the
// launch latency (~3 us from a trigger to the dependent's block 0, H200 session 23's chain trace)
// overlaps the predecessor's work rather than following it. It weakens pdl.cuh's consequence: a
// kernel's pre-wait reads of data written k launches back are safe only if at least one launch in
// between triggers after its wait (pdl_early_safe). The classes:
enum PdlClass : unsigned {
  kPdlNorm = 1,     // rmsnorm_reg_kernel (the decode norms)
  kPdlGemv = 2,     // the one-token tensor-core GEMVs (gemv_mma / gemv_mma_tma)
  kPdlGlu = 4,      // swiglu_kernel
  kPdlRouter = 8,   // norm_router_route_kernel
  kPdlSlab = 16,    // lean_slab_kernel (expert gate|up with its routing, dense lean GEMVs)
};

// The mask FT_PDL_EARLY gives (0 when unset or PDL is off); pdl_early_init() hands it to every
// translation unit's kernels (call it once the device is chosen, before any capture).
unsigned pdl_early_mask();
void pdl_early_init();
void pdl_early_register(void (*set)(unsigned mask));
// Whether a pre-wait read across these launches (the classes of the launches between the writer and
// the reader) is still ordered: some launch among them triggers after its wait.
inline bool pdl_early_safe(std::initializer_list<unsigned> between) {
  const unsigned m = pdl_early_mask();
  for (unsigned c : between)
    if ((m & c) == 0) return true;
  return false;
}

}  // namespace ft::cuda
