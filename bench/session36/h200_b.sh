#!/usr/bin/env bash
# Session 36 call 2: the least chunk of 256 keys in the tensor-core decode attention (FT_ATTN_MMA_PLAN=2,128,256)
# again, 3 rounds alternating: call 1 had Qwen3-30B-A3B @4096 +1.5% (one round) and Llama-8B @4096 -0.4%.
# Then the GEMV criterion's kernel figures (--experts, the 80% rows) on main's default.
R=/tmp/resb
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
models_wait
MC="FT_ATTN_MMA_PLAN=2,128,256"
AB_BUDGET=250 ab_envs 3 "$Q" - "$MC" -- -p 0 -n 128 -d 4096,16384 -r 2 --bw-gbs 4562
AB_BUDGET=400 ab_envs 3 "$L" - "$MC" -- -p 0 -n 128 -d 4096 -r 2 --bw-gbs 4562
log "ft-bench-gemv-cuda --experts"
timeout 100 "$B/ft-bench-gemv-cuda" --experts --pool-gib 1 > "$R/experts.txt" 2>&1; echo "rc=$?" >> "$R/experts.txt"
grep -E "4096x14336|768x2048|2048x768|read BW|rc=" "$R/experts.txt" | head -30
finish resb
