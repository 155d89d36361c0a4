// Decode attention: the dedicated decode kernel (attn_decode.cuh, default) or the SIMT
// split-K kernel (attn_simt.cuh with kPartial) and its combine kernel (kept for comparison,
// attention_set_decode_override(1)); attention() picks decode or prefill
// (attention_prefill.cu).
//
// Graph capture: the grid is (row blocks, splits, n_head_kv) with splits fixed by n_ctx and
// the SM count; the chunk length is planned on the device from *d_pos (attn_plan.cuh
// decode_plan), chunks past the live length exit at once, and the merge evaluates the same
// plan. No host sync, no allocation.
//
// Workspace: kDecodeTicketBytes of ticket counters (zero between calls), then the partials.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cuda/act_q8.h"
#include "cuda/attention.h"
#include "cuda/attn_args.cuh"
#include "cuda/attn_decode.cuh"
#include "cuda/attn_decode_mma.cuh"
#include "cuda/attn_decode_tuning.cuh"
#include "cuda/attn_plan.cuh"
#include "cuda/attn_simt.cuh"
#include "cuda/check.h"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace attn_detail {
namespace {

// Blocks per SM the SIMT decode grid aims for: the bf16 hd-128 block takes 47 KB of shared
// memory, so 4 fit on an SM and keep ~128 KB of K/V loads in flight there.
constexpr int64_t kSimtBlocksPerSm = 4;

std::atomic<int64_t> g_mma_launches{0};  // attention_mma_decode_launches
std::atomic<int64_t> g_decode_grid{0};   // attention_decode_grid_blocks

// A count from the environment: its value (negative read as 0), or dflt where unset or empty.
int64_t env_count(const char* name, int64_t dflt) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return dflt;
  const int64_t n = std::atoll(e);
  return n > 0 ? n : int64_t{0};
}

// The dedicated kernel's least chunk (attn_decode_tuning.cuh kDecodeMinChunk); FT_ATTN_MIN_CHUNK=N
// sets N keys (rounded up to kDecodeUnit), 0 none.
const int64_t g_min_chunk = ceil_div(env_count("FT_ATTN_MIN_CHUNK", kDecodeMinChunk), kDecodeUnit) * kDecodeUnit;

// The dedicated kernel's staged keys (attn_decode_tuning.cuh kDecodeStageKeys); FT_ATTN_STAGE_KEYS=N
// sets N, 0 none.
const int64_t g_stage_keys = env_count("FT_ATTN_STAGE_KEYS", kDecodeStageKeys);
std::atomic<int64_t> g_stage_override{-1};  // attention_set_decode_stage
// DecodeParams::pre_l1: FT_ATTN_PRE_L1=0|1|2 sets it for every launch; unset, 1 with q / k norms, else 0.
const int g_pre_l1 = [] {
  const char* e = std::getenv("FT_ATTN_PRE_L1");
  return e == nullptr || *e == '\0' ? -1 : static_cast<int>(env_count("FT_ATTN_PRE_L1", 0) % 3);
}();
// The dedicated kernel's most query rows a block (attn_decode_tuning.cuh kDecodeMaxRows,
// kDecodeMaxRowsOneToken); FT_ATTN_DECODE_ROWS=1|2|4|8 sets it for any token count (measurements).
const int g_rows_env = [] {
  const int64_t n = env_count("FT_ATTN_DECODE_ROWS", 0);
  return n == 1 || n == 2 || n == 4 || n == 8 ? static_cast<int>(n) : 0;
}();

// attention_set_decode_override (tests and benchmarks).
int g_decode_mode = 0, g_decode_rows = 0, g_decode_blocks_per_sm = 0, g_decode_keys_per_slot = 0;

// The rope inside the tensor-core kernel (attn_decode_tuning.cuh kMmaDecodeRope); FT_ATTN_MMA_ROPE=0|1.
const bool g_mma_rope_env = env_count("FT_ATTN_MMA_ROPE", kMmaDecodeRope ? 1 : 0) != 0;
std::atomic<int> g_mma_stages_override{-1}, g_mma_rope_override{-1}, g_mma_pre_override{-1};  // attention_set_mma_decode
std::atomic<int64_t> g_mma_min_chunk_override{-1};

// One block per (token, head) row, one thread per output column (combine_column).
__global__ void attn_combine_kernel(const CombineParams p) {
  for (int64_t c = threadIdx.x; c < p.d; c += blockDim.x) combine_column(p, blockIdx.x, c);
}

int64_t decode_row_blocks(int64_t n_tok, int64_t group) { return ceil_div(n_tok * group, kRowsPerBlock); }

// Rows per block of the dedicated kernel: the smallest power of two that holds a KV head's
// rows, at most kDecodeMaxRows (kDecodeMaxRowsOneToken for one token; or the overrides).
int decode_rows(int64_t n_tok, int64_t n_rows) {
  const int cap = g_decode_rows > 0 ? g_decode_rows
                  : g_rows_env > 0  ? g_rows_env
                  : n_tok == 1      ? kDecodeMaxRowsOneToken
                                    : kDecodeMaxRows;
  int r = 1;
  while (r < n_rows && r < cap) r *= 2;
  return r;
}

// AttnArgs::out_q8 on the paths without the Q8 epilogue: quantise out after the kernel.
void quantize_out_q8(const AttnArgs& a, cudaStream_t s) {
  if (a.out_q8 != nullptr) quantize_act_q8(a.out, a.ldo, a.n_head * a.head_dim_v, a.n_tok, a.out_q8, s);
}

void simt_decode(const AttnArgs& a, float* parts, cudaStream_t s);
bool mma_decode_supported(const AttnArgs& a);
void mma_decode(const AttnArgs& a, float* parts, cudaStream_t s);
void fast_decode(const AttnArgs& a, uint32_t* tickets, float* parts, cudaStream_t s);

}  // namespace
}  // namespace attn_detail

size_t attention_workspace_bytes(int64_t n_head, int64_t max_tok, int64_t n_ctx, int64_t head_dim_v) {
  using namespace attn_detail;
  const int64_t tok = max_tok < kAttnDecodeMaxTokens ? max_tok : kAttnDecodeMaxTokens;
  if (tok <= 0 || n_head <= 0 || n_ctx <= 0 || head_dim_v <= 0) return 0;
  // The most splits either decode kernel plans (the dedicated one has the smaller unit).
  const int64_t unit = kDecodeUnit < kChunkUnit ? kDecodeUnit : kChunkUnit;
  int64_t splits = ceil_div(n_ctx, unit);
  if (splits > kMaxSplits) splits = kMaxSplits;
  return kDecodeTicketBytes +
         static_cast<size_t>(tok * n_head * (splits + kDecodeMaxGroups) * (head_dim_v + 2)) * sizeof(float);
}

void attention_workspace_init(void* workspace, size_t bytes, cudaStream_t s) {
  if (workspace != nullptr && bytes > 0) FT_CUDA_CHECK(cudaMemsetAsync(workspace, 0, bytes, s));
}

void attention_set_decode_override(int mode, int max_rows, int blocks_per_sm, int keys_per_slot) {
  using namespace attn_detail;
  if (keys_per_slot != 0 && keys_per_slot != 2 && keys_per_slot != 4)
    fail_message("cuda attention_set_decode_override: keys_per_slot = " + std::to_string(keys_per_slot) +
                 " must be 0 (the default), 2 or 4");
  g_decode_mode = mode;
  g_decode_rows = max_rows;
  g_decode_blocks_per_sm = blocks_per_sm;
  g_decode_keys_per_slot = keys_per_slot;
}

void attention_set_decode_stage(int64_t keys) {
  attn_detail::g_stage_override.store(keys >= 0 ? keys : -1, std::memory_order_relaxed);
}

bool attention_fused_rope_supported(const AttnArgs& a) {
  using namespace attn_detail;
  return a.n_tok == 1 && a.head_dim_k == a.head_dim_v && a.head_dim_k <= 128 && g_decode_mode != 1 &&
         a.n_rot >= 0 && a.n_rot % 2 == 0 && a.n_rot <= a.head_dim_k;
}

bool attention_mma_decode_supported(const AttnArgs& a) { return attn_detail::mma_decode_supported(a); }

bool attention_mma_rope_on() {
  const int o = attn_detail::g_mma_rope_override.load(std::memory_order_relaxed);
  return o >= 0 ? o != 0 : attn_detail::g_mma_rope_env;
}

void attention_set_mma_decode(int stages, int rope, int pre, int64_t min_chunk) {
  attn_detail::g_mma_pre_override.store(pre > 0 ? pre : -1, std::memory_order_relaxed);
  attn_detail::g_mma_stages_override.store(stages == 0 || stages == 2 ? stages : -1, std::memory_order_relaxed);
  attn_detail::g_mma_min_chunk_override.store(min_chunk >= 0 ? min_chunk : -1, std::memory_order_relaxed);
  attn_detail::g_mma_rope_override.store(rope == 0 || rope == 1 ? rope : -1, std::memory_order_relaxed);
}

int64_t attention_mma_decode_launches() { return attn_detail::g_mma_launches.load(std::memory_order_relaxed); }
int64_t attention_decode_grid_blocks() { return attn_detail::g_decode_grid.load(std::memory_order_relaxed); }

void attention_decode(const AttnArgs& a, void* workspace, cudaStream_t s) {
  using namespace attn_detail;
  check_args(a, "cuda attention_decode");
  if (a.qkv_raw != nullptr && (!attention_fused_rope_supported(a) || a.rope_cs == nullptr))
    fail_message("cuda attention_decode: the rope inside (qkv_raw) needs one token, equal k / v head dims <= 128, "
                 "the dedicated kernel and a rope table (head_dim " + std::to_string(a.head_dim_k) + ", n_tok " +
                 std::to_string(a.n_tok) + ")");
  if (a.n_tok > kAttnDecodeMaxTokens)
    fail_message("cuda attention_decode: n_tok = " + std::to_string(a.n_tok) + " must be at most " +
                 std::to_string(kAttnDecodeMaxTokens));
  if (a.n_tok == 0) return;
  if (workspace == nullptr || reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
    fail_message("cuda attention_decode: workspace must be a 16-byte aligned device buffer");
  uint32_t* tickets = static_cast<uint32_t*>(workspace);
  float* parts = reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) + kDecodeTicketBytes);
  if (a.out_q8 != nullptr && reinterpret_cast<uintptr_t>(a.out_q8) % 16 != 0)
    fail_message("cuda attention_decode: out_q8 must be a 16-byte aligned device buffer");
  if ((g_decode_mode == 3 || (g_decode_mode == 0 && a.decode_mma)) && mma_decode_supported(a) &&
      (a.qkv_raw == nullptr || attention_mma_rope_on()))
    return mma_decode(a, parts, s);
  if (g_decode_mode == 1 || ((g_decode_mode == 0 || g_decode_mode == 3) && a.n_tok > kDecodeFastMaxTokens)) {
    simt_decode(a, parts, s);
    return quantize_out_q8(a, s);
  }
  fast_decode(a, tickets, parts, s);
}

namespace attn_detail {
namespace {

void simt_decode(const AttnArgs& a, float* parts, cudaStream_t s) {
  const int64_t d = a.head_dim_k, group = a.n_head / a.n_head_kv;
  const int64_t row_blocks = decode_row_blocks(a.n_tok, group);
  const int64_t splits = decode_splits(a.n_ctx, a.n_head_kv, row_blocks, kSimtBlocksPerSm * sm_count());

  SimtParams p{};
  p.q = a.q;
  p.ldq = a.ldq;
  p.k = a.k_cache;
  p.v = a.v_cache;
  p.kv_stride = a.n_head_kv * d;
  p.out = a.out;
  p.ldo = a.ldo;
  p.part_acc = parts;
  p.part_ml = p.part_acc + a.n_tok * a.n_head * splits * d;
  p.d_pos = a.d_pos;
  p.n_tok = a.n_tok;
  p.n_ctx = a.n_ctx;
  p.group = group;
  p.n_head = a.n_head;
  p.splits = splits;
  p.row_blocks = row_blocks;
  p.scale = a.scale;
  p.round = a.round;
  dispatch_simt<true>(a.kv_type, d, p, dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(a.n_head_kv),
                                            static_cast<unsigned>(splits)),
                      s);

  CombineParams c{};
  c.part_acc = p.part_acc;
  c.part_ml = p.part_ml;
  c.d_pos = a.d_pos;
  c.out = a.out;
  c.ldo = a.ldo;
  c.n_tok = a.n_tok;
  c.n_ctx = a.n_ctx;
  c.n_head = a.n_head;
  c.splits = splits;
  c.d = d;
  c.round = a.round;
  attn_combine_kernel<<<static_cast<unsigned>(a.n_tok * a.n_head), static_cast<unsigned>(d), 0, s>>>(c);
  FT_CUDA_CHECK_LAUNCH();
}

bool mma_decode_supported(const AttnArgs& a) {
  return a.n_tok == 1 && a.head_dim_k == kMmaDecodeD && a.head_dim_v == kMmaDecodeD &&
         (a.kv_type == KvType::kF16 || a.kv_type == KvType::kBF16) && a.n_head % a.n_head_kv == 0 &&
         a.n_head / a.n_head_kv <= kMmaDecodeMaxGroup;
}

// The tensor-core decode kernel's grid (attn_decode_tuning.cuh); FT_ATTN_MMA_PLAN=PER_SM,UNIT[,MIN]
// overrides it for measurements.
struct MmaPlanTuning {
  int64_t per_sm = kMmaDecodeBlocksPerSm, unit = kMmaDecodeUnit, min_chunk = kMmaDecodeMinChunk;
};
const MmaPlanTuning g_mma_plan = [] {
  MmaPlanTuning t;
  if (const char* e = std::getenv("FT_ATTN_MMA_PLAN")) {
    long long ps = 0, u = 0, mc = -1;
    if (std::sscanf(e, "%lld,%lld,%lld", &ps, &u, &mc) >= 1 && ps > 0) t.per_sm = ps;
    if (u >= kChunkUnit && u % kChunkUnit == 0) t.unit = u;  // the workspace holds the splits of kChunkUnit
    if (mc >= 0) t.min_chunk = mc;
  }
  return t;
}();

// The rope inside (AttnArgs::qkv_raw) into a kernel's parameters: the dedicated kernel's DecodeParams
// and the tensor-core kernel's MmaDecodeParams name these fields alike.
template <class P>
void set_rope_inside(P& p, const AttnArgs& a, int64_t d) {
  rope_detail::RopeInside& r = p.rope;
  r.rq = a.qkv_raw;
  r.rk = a.qkv_raw + a.n_head * d;
  r.rv = r.rk + a.n_head_kv * d;
  r.q_norm_w = a.q_norm_w;
  r.k_norm_w = a.k_norm_w;
  r.eps = a.rms_eps;
  r.rope_cs = a.rope_cs;
  r.n_rot = a.n_rot;
  r.neox = a.neox;
  r.k_store = const_cast<void*>(a.k_cache);  // the layer's cache, writable memory
  r.v_store = const_cast<void*>(a.v_cache);
}

// The tensor-core kernel's ring stages (attn_decode_tuning.cuh kMmaDecodeStages); FT_ATTN_MMA_STAGES=N
// sets 0 (the first tile in registers before the wait, the rest loaded one tile at a time) or 2.
const int g_mma_stages_env = [] {
  const int64_t n = env_count("FT_ATTN_MMA_STAGES", kMmaDecodeStages);
  return n == 0 || n == 2 ? static_cast<int>(n) : kMmaDecodeStages;
}();

// Tiles a warp of the ring kernel issues before the PDL wait (kMmaDecodePre; FT_ATTN_MMA_PRE=N, 1..stages).
const int g_mma_pre_env = static_cast<int>(env_count("FT_ATTN_MMA_PRE", kMmaDecodePre));

// The ring's default only where two blocks of the kernel fit an SM's shared memory (the plan counts
// on two: kMmaDecodeBlocksPerSm), with kMmaDecodeStaticSmemMax for its static arrays (asserted in the
// kernel); else stages 0. The H200's 228 KB take them; the 100 KB of an RTX 30 / 40 / 50 SM would hold
// one (not measured there).
int mma_default_stages(int ns) {
  const bool fits = kMmaDecodeBlocksPerSm * (mma_decode_smem(ns) + kMmaDecodeStaticSmemMax) <= max_smem_per_sm();
  return ns > 0 && !fits ? 0 : ns;
}

int mma_stages() {
  const int o = g_mma_stages_override.load(std::memory_order_relaxed);
  return o >= 0 ? o : mma_default_stages(g_mma_stages_env);
}

template <class T, int NS, bool ROPE>
void launch_mma_decode(dim3 grid, const MmaDecodeParams& p, cudaStream_t s) {
  constexpr int smem = mma_decode_smem(NS);
  if constexpr (smem > 48 * 1024) {
    static const bool set = [] {
      FT_CUDA_CHECK(cudaFuncSetAttribute(attn_mma_decode_kernel<T, NS, ROPE>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      return true;
    }();
    (void)set;
  }
  MmaDecodeParams q = p;
  const int o = g_mma_pre_override.load(std::memory_order_relaxed), pre = o > 0 ? o : g_mma_pre_env;
  q.pre = pre > 0 && pre < NS ? pre : NS;
  launch_pdl(attn_mma_decode_kernel<T, NS, ROPE>, grid, dim3(kMmaDecodeWarps * 32), smem, s, q);
}

template <class T, bool ROPE>
void launch_mma_decode_ns(int ns, dim3 grid, const MmaDecodeParams& p, cudaStream_t s) {
  if (ns == 2) return launch_mma_decode<T, 2, ROPE>(grid, p, s);
  launch_mma_decode<T, 0, ROPE>(grid, p, s);
}

void mma_decode(const AttnArgs& a, float* parts, cudaStream_t s) {
  const int64_t d = kMmaDecodeD, group = a.n_head / a.n_head_kv;
  const int64_t per_sm = g_decode_blocks_per_sm > 0 ? g_decode_blocks_per_sm : g_mma_plan.per_sm;
  // Chunks a KV head: per_sm blocks an SM counted at kMmaDecodePlanKvHeads KV heads, whatever the model has.
  const int64_t splits = decode_splits(a.n_ctx, 1, 1, ceil_div(per_sm * sm_count(), kMmaDecodePlanKvHeads), g_mma_plan.unit);
  MmaDecodeParams p{};
  p.q = a.q;
  p.k = a.k_cache;
  p.v = a.v_cache;
  p.kv_stride = a.n_head_kv * d;
  p.part_acc = parts;
  p.part_ml = parts + a.n_head * splits * d;
  p.d_pos = a.d_pos;
  p.n_ctx = a.n_ctx;
  p.unit = g_mma_plan.unit;
  const int64_t mc = g_mma_min_chunk_override.load(std::memory_order_relaxed);
  p.min_chunk = ceil_div(mc >= 0 ? mc : g_mma_plan.min_chunk, p.unit) * p.unit;
  p.splits = splits;
  p.group = static_cast<int>(group);
  p.scale_log2 = a.scale * 1.4426950408889634f;
  p.out = a.out;
  p.round = a.round;
  p.out_q8 = static_cast<uint8_t*>(a.out_q8);
  p.q8_k = a.n_head * d;
  const bool rope = a.qkv_raw != nullptr;
  if (rope) set_rope_inside(p, a, d);
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(a.n_head_kv));
  const int ns = mma_stages();
  if (a.kv_type == KvType::kF16)
    rope ? launch_mma_decode_ns<__half, true>(ns, grid, p, s) : launch_mma_decode_ns<__half, false>(ns, grid, p, s);
  else
    rope ? launch_mma_decode_ns<__nv_bfloat16, true>(ns, grid, p, s)
         : launch_mma_decode_ns<__nv_bfloat16, false>(ns, grid, p, s);
  FT_CUDA_CHECK_LAUNCH();
  launch_pdl(mma_combine_kernel, dim3(static_cast<unsigned>(a.n_head)), dim3(kMmaDecodeD), 0, s, p);
  FT_CUDA_CHECK_LAUNCH();
  g_mma_launches.fetch_add(1, std::memory_order_relaxed);
}

void fast_decode(const AttnArgs& a, uint32_t* tickets, float* parts, cudaStream_t s) {
  const int64_t d = a.head_dim_k, group = a.n_head / a.n_head_kv;
  const int rows = decode_rows(a.n_tok, a.n_tok * group);
  const int64_t row_blocks = ceil_div(a.n_tok * group, rows);
  const int64_t n_tickets = a.n_head_kv * row_blocks * kDecodeTicketsPerHead;
  if (n_tickets > kDecodeTickets)
    fail_message("cuda attention_decode: n_head_kv x row blocks = " + std::to_string(a.n_head_kv * row_blocks) +
                 " needs more than the " + std::to_string(kDecodeTickets) + " ticket counters");
  const int64_t per_sm = g_decode_blocks_per_sm > 0 ? g_decode_blocks_per_sm : kDecodeBlocksPerSm;
  const int64_t splits = decode_splits(a.n_ctx, a.n_head_kv, row_blocks, per_sm * sm_count(), kDecodeUnit);
  if (!a.ws_zeroed)
    FT_CUDA_CHECK(cudaMemsetAsync(tickets, 0, static_cast<size_t>(n_tickets) * sizeof(uint32_t), s));

  DecodeParams p{};
  p.q = a.q;
  p.ldq = a.ldq;
  p.k = a.k_cache;
  p.v = a.v_cache;
  p.kv_stride = a.n_head_kv * d;
  p.out = a.out;
  p.ldo = a.ldo;
  p.part_acc = parts;
  p.part_ml = parts + a.n_tok * a.n_head * splits * d;
  p.group_acc = p.part_ml + a.n_tok * a.n_head * splits * 2;
  p.group_ml = p.group_acc + a.n_tok * a.n_head * kDecodeMaxGroups * d;
  p.tickets = tickets;
  p.d_pos = a.d_pos;
  p.n_tok = a.n_tok;
  p.n_ctx = a.n_ctx;
  p.group = group;
  p.n_head = a.n_head;
  p.splits = splits;
  p.row_blocks = row_blocks;
  p.min_chunk = g_min_chunk;
  const int64_t kv_bytes = a.kv_type == KvType::kF32 ? 4 : 2, stage_cap = kDecodeStageBytes / (2 * d * kv_bytes);
  const int64_t over = g_stage_override.load(std::memory_order_relaxed), want = over >= 0 ? over : g_stage_keys;
  p.stage_keys = want < stage_cap ? want : stage_cap;
  p.scale_log2 = a.scale * 1.4426950408889634f;
  p.round = a.round;
  p.out_q8 = static_cast<uint8_t*>(a.out_q8);  // the kernel's epilogue writes it
  p.q8_k = a.n_head * d;
  p.q8_row_bytes = act_q8_row_bytes(p.q8_k);
  if (a.qkv_raw != nullptr) {
    set_rope_inside(p, a, d);
    p.pre_l1 = g_pre_l1 >= 0 ? g_pre_l1 : a.q_norm_w != nullptr ? 1 : 0;
  }
  // AttnArgs::max_keys: a chunk holds at least max(unit, min_chunk) keys (decode_plan_min), so no
  // more than ceil(max_keys / that) chunks are ever live; the grid stops there.
  int64_t grid_splits = splits;
  if (a.max_keys > 0 && a.max_keys < a.n_ctx) {
    const int64_t most = ceil_div(a.max_keys, p.min_chunk > kDecodeUnit ? p.min_chunk : kDecodeUnit);
    if (most < grid_splits) grid_splits = most;
  }
  g_decode_grid.store(row_blocks * grid_splits * a.n_head_kv, std::memory_order_relaxed);
  dispatch_decode(a.kv_type, d, rows, g_decode_keys_per_slot, p,
                  dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(grid_splits),
                       static_cast<unsigned>(a.n_head_kv)),
                  s);
}

}  // namespace
}  // namespace attn_detail

void attention(const AttnArgs& a, void* workspace, cudaStream_t s) {
  if (a.n_tok <= kAttnDecodeMaxTokens) return attention_decode(a, workspace, s);
  attention_prefill(a, s);
  attn_detail::quantize_out_q8(a, s);
}

}  // namespace ft::cuda
