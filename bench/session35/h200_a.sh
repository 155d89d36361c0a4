#!/usr/bin/env bash
# Session 35's prepared call (this session was lent no device; for the next one). Three opt-in changes, each the
# same bits as the default where it applies, measured against it:
#   TPC  two 16-row tiles a CTA in the tiled GEMV (Llama-8B's gate|up in one wave): FT_GEMV_NVFP4_TILED_PLAN's 4th field
#   NQC  the FFN norm fold's producer tail on wo by thread-block clusters instead of tickets: FT_NORM_FOLD_CLUSTER=1
#        (with FT_NORM_FOLD=3; the default folds the attention norm only, 2)
#   MC   a least chunk of 256 keys in the tensor-core decode attention's plan: FT_ATTN_MMA_PLAN's 3rd field
# The tests of all three first (they never ran on a GPU), then the kernel alone, tokens and tg128.
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "tests"
# Session 36 added the tests its changes touched: CudaAttention.MmaDecodeLeastChunkTakesEffect (in Mma*), the
# dedicated kernel's remaining override instances (DecodeOverrides), the GEMV suites beside the removed bulk kernel.
gpu_tests 180 'CudaAttention.Mma*:CudaAttention.*Rope*:GpuAttentionMma.*:CudaNvfp4Tiled.*:CudaNormFold.*:CudaAttention.DecodeOverrides:CudaGemvPersist.*:CudaGemvTma.*'
log "ft-bench-gemv-cuda --tiled --no-sweep"
timeout 60 "$B/ft-bench-gemv-cuda" --tiled --no-sweep --pool-gib 1 > "$R/tiled.txt" 2>&1; echo "rc=$?" >> "$R/tiled.txt"
grep -E "^\| tiled|rc=" "$R/tiled.txt"
models_wait
TPC="FT_GEMV_NVFP4_TILED_PLAN=28672x4096=4,2,0,2"
NQ3="FT_NORM_FOLD=3"
NQC="FT_NORM_FOLD=3 FT_NORM_FOLD_CLUSTER=1"
tokens_under "$TPC" $L                        # the same bits: must say "same 64 tokens"
tokens_under "$NQ3" $L                        # the FFN fold may part from the default at a near tie ...
tokens_under "$NQC" $L                        # ... but NQC must part exactly where NQ3 does (the same bytes)
python3 -c "
import json; d='$R/gen_llama8b-nvfp4_'
a=json.load(open(d+'FT_NORM_FOLD_3.json'))['tokens']; b=json.load(open(d+'FT_NORM_FOLD_3_FT_NORM_FOLD_CLUSTER_1.json'))['tokens']
print('NQC vs NQ3:', 'same %d tokens' % len(a) if a == b else 'DIFFER')" 2>&1 | tee -a "$R/log.txt"
AB_BUDGET=400 ab_envs 2 "$L" - "$TPC" "$NQ3" "$NQC" -- -p 0 -n 128 -r 2 --bw-gbs 4562
MC="FT_ATTN_MMA_PLAN=2,128,256"
AB_BUDGET=500 ab_envs 1 "$L" - "$MC" -- -p 0 -n 128 -d 4096,16384 -r 2 --bw-gbs 4562
AB_BUDGET=550 ab_envs 1 "$Q" - "$MC" -- -p 0 -n 128 -d 4096 -r 2 --bw-gbs 4562
finish resa
