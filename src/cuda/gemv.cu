// Decode GEMV entry (gemv.h): argument checks and the choice between the float path
// (gemv_float.cu) and the integer path (gemv_q8.cu); both run the skeleton of
// gemv_kernel.cuh with plans from gemv_tuning.h. NVFP4 on the integer path takes its own
// kernels, the slab / packed kernels of gemv_nvfp4.cu and, for dense one-token launches of
// 2048+ rows, the tensor-core kernel of gemv_mma.cu, unless a generic plan is forced (lanes
// override) or the rows are not 4-byte aligned.
#include "cuda/gemv.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/act_q8.h"
#include "cuda/check.h"
#include "cuda/gemv_launch.h"
#include "cuda/gemv_tuning.h"
#include "cuda/glu.h"
#include "cuda/moe_route.h"
#include "cuda/norm_fold.h"
#include "cuda/nvfp4_tiled.h"

namespace ft::cuda {
namespace {

using namespace gemv_detail;

int g_stages_override = -1;
int g_glu_order_override = -1;  // gemv_set_glu_order (set_glu reads it)
int g_lanes_override = 0;
int g_rows_override = 0;
Nvfp4Override g_nvfp4_override;

int64_t block_elems(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0:
    case GgmlType::MXFP4:
      return 32;
    case GgmlType::NVFP4:
      return 64;
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
      return 256;
    default:
      return 1;
  }
}

}  // namespace

bool gemv_supported(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
    case GgmlType::MXFP4:
    case GgmlType::NVFP4:
      return true;
    default:
      return false;
  }
}

bool gemv_q8_supported(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
    case GgmlType::MXFP4:
    case GgmlType::NVFP4:
      return true;
    default:
      return false;
  }
}

void gemv_set_glu_order(int order) { g_glu_order_override = order < 0 ? -1 : (order != 0 ? 1 : 0); }
void gemv_set_stages_override(int stages) { g_stages_override = stages; }
void gemv_set_lanes_override(int lanes) { g_lanes_override = lanes; }
void gemv_set_rows_override(int rows) { g_rows_override = rows; }
void gemv_set_nvfp4_override(int kernel, int rows, int x_smem) {
  g_nvfp4_override.kernel = kernel;
  g_nvfp4_override.rows = rows;
  g_nvfp4_override.x_smem = x_smem;
}

void gemv_set_nvfp4_variant(int decode, int minb) {
  g_nvfp4_override.decode = decode;
  g_nvfp4_override.minb = minb;
}

// FT_GEMV_NVFP4_MMA=1 (or W,S: warps per CTA, stages) sends every shape the mma kernel takes
// to it (gemv_mma.cu), also those the plan leaves to the slab kernel (under
// kNvfp4MmaMinRows rows); FT_GEMV_NVFP4_MMA=0 sends the plan's mma launches to the slab
// kernel: end-to-end comparisons in one binary.
const bool g_env_mma = [] {
  const char* e = std::getenv("FT_GEMV_NVFP4_MMA");
  if (e == nullptr || *e == '\0') return false;
  if (*e == '0') {
    g_nvfp4_override.mma_off = true;
    return true;
  }
  g_nvfp4_override.kernel = 3;
  int w = 0, s = 0;
  if (std::sscanf(e, "%d,%d", &w, &s) == 2 && w > 1) g_nvfp4_override.mma_warps = w, g_nvfp4_override.mma_stages = s;
  return true;
}();

void gemv_set_nvfp4_mma(int warps, int stages) {
  g_nvfp4_override.mma_warps = warps;
  g_nvfp4_override.mma_stages = stages;
}

// FT_GEMV_NVFP4_PERSIST=0 takes the plan without the persistent kernel (session 7's routing);
// =1 (or F,G,S: fold warps, groups per CTA, stages) sends every shape it takes to it.
const bool g_env_persist = [] {
  const char* e = std::getenv("FT_GEMV_NVFP4_PERSIST");
  if (e == nullptr || *e == '\0') return false;
  if (*e == '0') {
    g_nvfp4_override.persist_off = true;
    return true;
  }
  g_nvfp4_override.kernel = 4;
  int f = 0, gr = 0, st = 0;
  if (std::sscanf(e, "%d,%d,%d", &f, &gr, &st) == 3 && f > 1)
    g_nvfp4_override.mma_warps = f, g_nvfp4_override.persist_groups = gr, g_nvfp4_override.persist_stages = st;
  return true;
}();

// FT_GEMV_NVFP4_TMA=1 (or 1,W,J,S) sends the plan's mma launches to the warp-fed bulk-copy kernel
// (gemv_mma_tma.cu); 2 also the one-token dense shapes the plan gives the slab kernel; 0 none
// (not even the plan's).
const bool g_env_tma = [] {
  const char* e = std::getenv("FT_GEMV_NVFP4_TMA");
  if (e == nullptr || *e == '\0') return false;
  int m = 0, w = 0, j = 0, st = 0;
  if (std::sscanf(e, "%d,%d,%d,%d", &m, &w, &j, &st) >= 1) gemv_set_nvfp4_tma(m == 0 ? -1 : m, w, j, st);
  return true;
}();

void gemv_set_nvfp4_tma(int mode, int warps, int chunk, int stages) {
  g_nvfp4_override.tma = mode;
  g_nvfp4_override.tma_warps = warps;
  g_nvfp4_override.tma_chunk = chunk;
  g_nvfp4_override.tma_stages = stages;
}

// FT_GEMV_NVFP4_EXPERTS=0 sends the one-token expert launches back to the slab / packed kernels
// (the A/B of the lean expert kernels, gemv_nvfp4_lean.cu).
const bool g_env_experts = [] {
  const char* e = std::getenv("FT_GEMV_NVFP4_EXPERTS");
  if (e != nullptr && *e == '0') g_nvfp4_override.experts_off = true;
  return true;
}();

void gemv_set_nvfp4_experts(bool on) { g_nvfp4_override.experts_off = !on; }

// FT_GEMV_NVFP4_MMA_BATCH=0: 2..8 tokens of a tiled weight on the slab kernel, not gemv_mma_batch.cu; =2..4: on
// at that many stages (a benchmark knob).
const bool g_env_mma_batch = [] {
  const char* e = std::getenv("FT_GEMV_NVFP4_MMA_BATCH");
  if (e != nullptr && *e == '0') g_nvfp4_override.batch_off = true;
  if (e != nullptr && *e >= '2' && *e <= '4') g_nvfp4_override.batch_stages = *e - '0';
  return true;
}();

// FT_GEMV_NVFP4_BATCH_WAVE=0: that kernel's grid a CTA a tile (as before session 54), not one wave of CTAs
// walking the tiles (the same bits; the A/B knob).
const bool g_env_batch_wave = [] {
  const char* e = std::getenv("FT_GEMV_NVFP4_BATCH_WAVE");
  if (e != nullptr && *e == '0') g_nvfp4_override.batch_wave_off = true;
  return true;
}();

void gemv_set_nvfp4_batch_wave(bool on) { g_nvfp4_override.batch_wave_off = !on; }

void gemv_set_nvfp4_mma_batch(bool on, int stages) {
  g_nvfp4_override.batch_off = !on;
  g_nvfp4_override.batch_stages = stages;
}

// FT_GEMV_NVFP4_EXPERT_PLAN=R,B (a benchmark knob): the lean expert gate / up launches at R rows an
// item and B blocks an SM (1,4 1,6 2,4 2,6 4,4) instead of the plan's; the rows' sums, so the bits,
// do not depend on it.
const bool g_env_expert_plan = [] {
  const char* e = std::getenv("FT_GEMV_NVFP4_EXPERT_PLAN");
  int r = 0, b = 0;
  if (e != nullptr && std::sscanf(e, "%d,%d", &r, &b) == 2)
    g_nvfp4_override.expert_rows = r, g_nvfp4_override.expert_minb = b;
  return true;
}();

// FT_GEMV_NVFP4_DENSE_PLAN=R,X[,B] (a benchmark knob): the lean dense one-token launches at R rows an
// item (1, 2, 4), activations from shared (X 1, where they fit) or global memory (X 0), B blocks an SM
// (4 or 8 with X 0 and R 1 / 2; default 8 there, H200 session 30); the bits do not depend on it.
const bool g_env_dense_plan = [] {
  const char* e = std::getenv("FT_GEMV_NVFP4_DENSE_PLAN");
  int r = 0, x = -1, b = 0;
  if (e != nullptr && std::sscanf(e, "%d,%d,%d", &r, &x, &b) >= 2 && (r == 1 || r == 2 || r == 4))
    g_nvfp4_override.dense_rows = r, g_nvfp4_override.dense_xs = x != 0 ? 1 : 0, g_nvfp4_override.dense_minb = b;
  return true;
}();

// FT_GEMV_NVFP4_TILED_PLAN="ROWSxK=W,S[,SMEM];.." (a benchmark knob): the tiled tensor-core GEMV of those
// one-token shapes at W warps and S stages (gemv_mma.cu's instances: 4 x 2 / 3 / 4, 8 x 2 / 3 / 4,
// 16 x 2; 0: the plain launch's, gemv_nvfp4_tiled_launch without after_gemv) and at least SMEM bytes of shared memory a block (capping its blocks
// an SM; H200 session 32 call 1: without the attention norm, Llama-8B's qkv launch held to 3-4 blocks an SM
// decodes at 531.9 tok/s against 490.7 unheld -- released under the down projection its blocks pack onto the
// first SMs that free up); at most 8 shapes. The bits depend on W only
// (the order the warps' sums add in), not on S or SMEM. (A fourth field, two 16-row tiles a CTA, lost 3.2% on
// Llama-8B in H200 session 36 and was removed.)
const bool g_env_tiled_plan = [] {
  const char* e = std::getenv("FT_GEMV_NVFP4_TILED_PLAN");
  for (const char* c = e; c != nullptr && *c != '\0' && g_nvfp4_override.n_tiled_plan < 8;) {
    long long r = 0, k = 0;
    int w = 0, s = 0, m = 0;
    if (std::sscanf(c, "%lldx%lld=%d,%d,%d", &r, &k, &w, &s, &m) >= 4)
      g_nvfp4_override.tiled_plan[g_nvfp4_override.n_tiled_plan++] = {r, k, w, s, m};
    c = std::strchr(c, ';');
    if (c != nullptr) ++c;
  }
  return true;
}();

// FT_GEMV_NVFP4_LEAN_DENSE=0 sends the dense one-token slab launches back to the slab kernel.
const bool g_env_lean_dense = [] {
  const char* e = std::getenv("FT_GEMV_NVFP4_LEAN_DENSE");
  if (e != nullptr && *e == '0') g_nvfp4_override.lean_dense_off = true;
  return true;
}();

void gemv_set_nvfp4_lean_dense(bool on) { g_nvfp4_override.lean_dense_off = !on; }

void gemv_set_nvfp4_persist(int groups, int stages) {
  static const bool env_off = g_nvfp4_override.persist_off;  // FT_GEMV_NVFP4_PERSIST=0
  g_nvfp4_override.persist_off = groups < 0 || (groups == 0 && env_off);
  g_nvfp4_override.persist_groups = groups > 0 ? groups : 0;
  g_nvfp4_override.persist_stages = stages;
}

namespace {

// FT_GEMV_Y_EARLY=0: accumulating launches read y after their PDL wait whatever GemvArgs::y_early says
// (the A/B of session 14).
const bool g_y_early_off = [] {
  const char* e = std::getenv("FT_GEMV_Y_EARLY");
  return e != nullptr && *e == '0';
}();

// FT_GEMV_RS_EARLY=0: the tensor-core kernels load row_scale in their epilogue (Params::rs_early).
const bool g_rs_early_off = [] {
  const char* e = std::getenv("FT_GEMV_RS_EARLY");
  return e != nullptr && *e == '0';
}();

// Whether the integer path takes a (else the float path).
bool takes_q8(const GemvArgs& a) { return a.xq != nullptr && gemv_q8_supported(a.type); }

// Checks a's arguments (throws ft::Error) and makes the kernels' Params.
Params checked_params(const GemvArgs& a) {
  const std::string tn(type_name(a.type));
  if (!gemv_supported(a.type)) fail_message("cuda gemv: weight type " + tn + " is not supported");
  if (a.k <= 0 || a.k % 32 != 0 || a.k % block_elems(a.type) != 0)
    fail_message("cuda gemv: k = " + std::to_string(a.k) + " must be a positive multiple of 32 and of the " + tn +
                 " block");
  if (a.rows <= 0) fail_message("cuda gemv: rows = " + std::to_string(a.rows) + " must be positive");
  const bool grouped = a.ids != nullptr;
  if (a.n_tok < 1 || (!grouped && a.n_tok > kGemvMaxTokens) || a.n_tok > 65535)
    fail_message("cuda gemv: n_tok = " + std::to_string(a.n_tok) + " out of range (1..8, grouped 1..65535)");
  const bool q8 = a.xq != nullptr && gemv_q8_supported(a.type);
  if (q8) {
    if (reinterpret_cast<uintptr_t>(a.xq) % 16 != 0) fail_message("cuda gemv: xq must be 16-byte aligned");
  } else if (reinterpret_cast<uintptr_t>(a.x) % 16 != 0 || a.ldx % 4 != 0) {
    fail_message("cuda gemv: X must be 16-byte aligned with ldx a multiple of 4");
  }
  if (grouped && a.x_div < 1) fail_message("cuda gemv: x_div must be >= 1");
  if (a.row_bytes < row_bytes(a.type, a.k)) fail_message("cuda gemv: row stride shorter than a row");
  if (a.rows * a.n_tok >= (int64_t{1} << 31))
    fail_message("cuda gemv: rows x n_tok = " + std::to_string(a.rows * a.n_tok) + " must stay below 2^31");
  if (a.slot_w != nullptr) {
    if (!grouped) fail_message("cuda gemv: slot_w (combine) needs the grouped mode (ids)");
    if (a.n_used < 1 || a.n_tok % a.n_used != 0)
      fail_message("cuda gemv: combine needs n_used >= 1 dividing n_tok (n_tok = " + std::to_string(a.n_tok) +
                   ", n_used = " + std::to_string(a.n_used) + ")");
  }

  Params p{};
  p.w = a.w;
  p.row_bytes = a.row_bytes;
  p.k = a.k;
  p.rows = a.rows;
  p.x = a.x;
  p.ldx = a.ldx;
  p.xq = static_cast<const uint8_t*>(a.xq);
  p.xq_row = act_q8_row_bytes(a.k);
  p.n_tok = grouped ? 1 : static_cast<int>(a.n_tok);
  p.y = a.y;
  p.ldy = a.ldy;
  p.row_scale = a.row_scale;
  p.scale = a.scale;
  p.round = a.round;
  p.ids = a.ids;
  p.expert_bytes = a.expert_bytes;
  p.x_div = a.x_div;
  p.bank = a.bank;
  p.bank_col = a.bank_col;
  p.slot_w = a.slot_w;
  p.n_used = a.slot_w != nullptr ? a.n_used : 1;
  p.accumulate = a.accumulate ? 1 : 0;
  p.ids_early = grouped && a.ids_early ? 1 : 0;
  p.y_early = a.accumulate && a.y_early && !g_y_early_off ? 1 : 0;
  p.rs_early = g_rs_early_off ? 0 : 1;
  p.tiled = a.tiled ? (a.lanes ? 2 : 1) : 0;
  p.nq_w = a.nq_w;  // the norm fold's producer tail: kernels that have one (gemv_folded checked it)
  p.nq_xq = static_cast<uint8_t*>(a.nq_xq);
  p.nq_part = a.nq_part;
  p.nq_count = a.nq_count;
  p.after_gemv = a.after_gemv ? 1 : 0;
  p.scales_clean = a.scales_clean && a.type == GgmlType::NVFP4 ? 1 : 0;
  p.l2a = a.l2_ahead;
  if (a.tiled && (a.type != GgmlType::NVFP4 || grouped || !takes_q8(a) || a.w_pair != nullptr ||
                  !nvfp4_tile_ok(a.rows, a.k, a.row_bytes)))
    fail_message("cuda gemv: a tiled weight needs NVFP4, dense, the integer path (xq) and a tileable shape (rows " +
                 std::to_string(a.rows) + ", k " + std::to_string(a.k) + ")");
  return p;
}

// The integer-path lanes per row of this call (0: the table's).
int call_lanes(const GemvArgs& a) { return a.plan_lanes != 0 ? a.plan_lanes : g_lanes_override; }

// The NVFP4 kernels (gemv_nvfp4.cu) on p where a's type, path and plan knobs let them take it;
// false, launching nothing, where they do not.
bool nvfp4_launch(const GemvArgs& a, const Params& p, cudaStream_t stream) {
  Nvfp4Override nv = g_nvfp4_override;
  if (a.tiled) return gemv_nvfp4_tiled(p, a.n_tok, nv, stream), true;  // checked_params: NVFP4, dense, q8
  if (a.plan_nvfp4_kernel >= 0) nv.kernel = a.plan_nvfp4_kernel;
  return takes_q8(a) && a.type == GgmlType::NVFP4 && call_lanes(a) == 0 && nv.kernel != 0 &&
         gemv_nvfp4(p, a.n_tok, a.ids != nullptr, nv, stream);
}

// GemvArgs::glu_xq (the dense SwiGLU tail): whether a asks for it; a without it, its arguments checked;
// the tail's fields in p.
bool has_glu(const GemvArgs& a) { return a.glu_xq != nullptr || a.glu_h != nullptr || a.glu_count != nullptr; }
GemvArgs without_glu(const GemvArgs& a) {
  if (a.glu_xq == nullptr || a.glu_h == nullptr || a.glu_count == nullptr ||
      reinterpret_cast<uintptr_t>(a.glu_xq) % 16 != 0 || a.ids != nullptr || a.n_tok != 1 || a.rows % 64 != 0 ||
      a.accumulate || a.ldy < a.rows)
    fail_message("cuda gemv: glu_xq needs glu_h, glu_count, a 16-byte aligned Q8 buffer and one token of a dense "
                 "gate|up (no ids, rows % 64 == 0, no accumulate); rows " + std::to_string(a.rows));
  GemvArgs plain = a;
  plain.glu_xq = nullptr;
  plain.glu_h = nullptr;
  plain.glu_count = nullptr;
  return plain;
}
// FT_GLU_ORDER=0: the SwiGLU tail's gate|up takes its tiles in row order (all gate tiles, then the up
// tiles) instead of block order (gemv_mma.cu GO): the A/B of that order.
const bool g_glu_order_env = [] {
  const char* e = std::getenv("FT_GLU_ORDER");
  return e == nullptr || *e != '0';
}();

void set_glu(Params& p, const GemvArgs& a) {
  p.glu_xq = static_cast<uint8_t*>(a.glu_xq);
  p.glu_h = a.glu_h;
  p.glu_count = a.glu_count;
  p.glu_xq_row = act_q8_row_bytes(a.rows / 2);
  p.glu_order = g_glu_order_override >= 0 ? g_glu_order_override : (g_glu_order_env ? 1 : 0);
}

// a's kernel parameters with its pair (w_pair: w2, y2_off; none: as checked_params) and, in first,
// a without the pair (what the checks and the NVFP4 dispatch see).
Params pair_params(const GemvArgs& a, GemvArgs& first) {
  first = a;
  first.w_pair = nullptr;
  Params p = checked_params(first);
  p.w2 = a.w_pair;
  p.y2_off = a.w_pair_y_off;
  return p;
}

}  // namespace

// gemv without the norm fold's consumer (norm_part); a producer's fields ride in Params.
static void gemv_dispatch(const GemvArgs& a, cudaStream_t stream) {
  if (has_glu(a)) {
    // The tensor-core kernel of a tiled weight does the SwiGLU in its epilogue; anything else is
    // the plain product, then swiglu_q8.
    const GemvArgs plain = without_glu(a);
    const int64_t n_ff = a.rows / 2;
    if (a.tiled && takes_q8(a)) {
      Params p = checked_params(plain);
      set_glu(p, a);
      if (gemv_nvfp4_tiled(p, 1, g_nvfp4_override, stream)) return;
    } else {
      gemv_dispatch(plain, stream);
    }
    swiglu_q8(a.y, a.ldy, n_ff, 1, a.glu_h, n_ff, a.round, a.glu_xq, stream);
    return;
  }
  if (a.route_logits != nullptr) {
    if (a.ids == nullptr || a.ids != a.route_ids || a.route_w == nullptr || a.slot_w != nullptr ||
        a.route_n_expert < a.n_tok || a.route_n_expert > kMoeRouteMaxExperts)
      fail_message("cuda gemv: route_logits needs ids == route_ids, route_w, no combine and n_tok <= route_n_expert <= " +
                   std::to_string(kMoeRouteMaxExperts) + " (n_tok " + std::to_string(a.n_tok) + ", n_expert " +
                   std::to_string(a.route_n_expert) + ")");
    // The lean slab kernel routes in its CTAs (gemv_nvfp4 launches nothing else with a routing);
    // anything else gets moe_route first and the plain call.
    GemvArgs first;
    Params p = pair_params(a, first);
    p.route_logits = a.route_logits;
    p.route_n_expert = static_cast<int>(a.route_n_expert);
    p.route_n_used = static_cast<int>(a.n_tok);
    p.route_fast = moe_route_fast() != 0 ? 1 : 0;  // never the tests' fast-only mode (ids -1 on a tie)
    p.route_ids = a.route_ids;
    p.route_w = a.route_w;
    if (nvfp4_launch(first, p, stream)) return;
    moe_route(a.route_logits, a.route_n_expert, a.route_n_expert, 1, static_cast<int>(a.n_tok), a.route_ids, a.route_w,
              stream);
    GemvArgs plain = a;
    plain.route_logits = nullptr;
    gemv_dispatch(plain, stream);
    return;
  }
  if (a.w_pair != nullptr) {
    if (a.ids == nullptr || a.slot_w != nullptr)
      fail_message("cuda gemv: w_pair needs the grouped mode (ids) without a combine");
    GemvArgs first;
    const Params p = pair_params(a, first);
    if (nvfp4_launch(first, p, stream)) return;
    GemvArgs second = first;
    second.w = a.w_pair;
    second.y = a.y + a.w_pair_y_off;
    second.bank_col = a.bank_col + 1;
    gemv_dispatch(first, stream);
    gemv_dispatch(second, stream);
    return;
  }
  const Params p = checked_params(a);
  const bool grouped = a.ids != nullptr, q8 = takes_q8(a);
  if (nvfp4_launch(a, p, stream)) return;
  if (q8) {
    Q8Plan over;
    over.stages = g_stages_override;
    over.lanes = call_lanes(a);
    over.rows = g_rows_override;
    gemv_q8(a.type, p, a.n_tok, grouped, over, stream);
  } else {
    FloatPlan over;
    over.stages = g_stages_override;
    gemv_float(a.type, p, a.n_tok, grouped, over, stream);
  }
}

namespace {

thread_local int64_t t_nq_tails = 0;

// The norm fold's arguments (gemv.h, norm_fold.h): throws naming what is wrong.
void check_fold(const GemvArgs& a, bool prod, bool cons) {
  const std::string where = "cuda gemv (norm fold, rows " + std::to_string(a.rows) + ", k " + std::to_string(a.k) + "): ";
  if (a.ids != nullptr || a.n_tok != 1 || !takes_q8(a) || a.round != Round::kNone)
    fail_message(where + "needs one token of a dense product on the integer path (xq), no rounding");
  if (prod) {
    if (a.nq_w == nullptr || a.nq_xq == nullptr || a.nq_part == nullptr || a.nq_count == nullptr)
      fail_message(where + "a producer needs nq_w, nq_xq, nq_part and nq_count");
    if (!a.accumulate || a.rows % 32 != 0 || a.rows > kNormFoldMaxN || reinterpret_cast<uintptr_t>(a.nq_xq) % 16 != 0)
      fail_message(where + "a producer accumulates into a residual row of rows % 32 == 0, rows <= " +
                   std::to_string(kNormFoldMaxN) + ", with a 16-byte aligned Q8 buffer");
  }
  if (cons && a.k > kNormFoldMaxN)
    fail_message(where + "a consumer's row must have at most " + std::to_string(kNormFoldMaxN) + " elements");
}

// The norm fold's two halves around the product (see gemv.h).
void gemv_folded(const GemvArgs& a, cudaStream_t stream) {
  const bool prod = a.nq_w != nullptr || a.nq_xq != nullptr || a.nq_part != nullptr || a.nq_count != nullptr;
  const bool cons = a.norm_part != nullptr;
  check_fold(a, prod, cons);
  const int64_t t0 = t_nq_tails;
  auto produce_if_needed = [&] {
    if (prod && t_nq_tails == t0) norm_fold_produce(a.y, a.nq_w, a.rows, a.nq_xq, a.nq_part, stream);
  };
  GemvArgs rest = a;
  rest.norm_part = nullptr;
  if (cons && a.tiled) {  // the tensor-core kernel scales the row's block scales as it loads them
    const bool glu = has_glu(a);
    Params p = checked_params(glu ? without_glu(rest) : rest);
    if (glu) set_glu(p, a);
    p.norm_part = a.norm_part;
    p.norm_eps = a.norm_eps;
    if (gemv_nvfp4_tiled(p, 1, g_nvfp4_override, stream, /*mma_only=*/true)) return produce_if_needed();
  }
  if (cons) norm_fold_apply(const_cast<void*>(a.xq), a.k, a.norm_part, a.norm_eps, stream);
  gemv_dispatch(rest, stream);
  produce_if_needed();
}

}  // namespace

namespace gemv_detail {
void note_nq_tail() { ++t_nq_tails; }
}  // namespace gemv_detail

int64_t gemv_norm_fold_tails() { return t_nq_tails; }

void gemv(const GemvArgs& a, cudaStream_t stream) {
  if (a.norm_part != nullptr || a.nq_w != nullptr || a.nq_xq != nullptr || a.nq_part != nullptr ||
      a.nq_count != nullptr)
    return gemv_folded(a, stream);
  gemv_dispatch(a, stream);
}

}  // namespace ft::cuda
