#!/usr/bin/env bash
# Session 48, call 1: the tiled GEMV's ceiling off HBM's limit, and session 47's unrun call 7.
# 1. test_cuda CudaNvfp4Tiled.* / GpuNvfp4Tiled.* (CudaNvfp4Tiled.AfterGemvLaunchEqualsThePlainOne, edited in 7acaedb,
#    has not yet run on a GPU).
# 2. ft-bench-gemv-cuda --tiled --no-sweep from HBM (copies over 1 GiB) and with --copies 1: each shape's one matrix
#    (<= 33 MB) stays in the 50 MB L2 of an H100, so the kernel runs off HBM's limit -- the time its own work takes.
#    If that time is near the H200's HBM time while the plain read of the same bytes from L2 (--sol --copies 1) is
#    well below it, the per-weight work is what holds the H200; if the GEMV from L2 is well below, latency is.
# 3. the loop's opcode mix (bench/sass_loop.py on the device's cuobjdump).
# 4. session 47's call 7 (its test is step 1): seven older knobs eagerly loaded, Llama-8B, 2 rounds alternating.
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 260 bash bench/session48/call1.sh", carry=[".devcarry/pack"])
R=/tmp/res1
source bench/device_common.sh
# The tiled kernels' SASS (no disassembler on the build machine): every nvfp4_mma_kernel instance, gzipped.
(cuobjdump -sass "$B/ft-bench-gemv-cuda" 2>&1 | awk '/Function : /{keep = /nvfp4_mma_kernel/} keep' | gzip > "$R/sass_mma.txt.gz") &
gpu_preamble 40 'CudaNvfp4Tiled.*:GpuNvfp4Tiled.*' llama8b-nvfp4
for m in "--pool-gib 1" "--copies 1"; do
  f=$R/gemv_$(echo "$m" | tr -d ' -').txt
  log "ft-bench-gemv-cuda --tiled --no-sweep $m"
  timeout 100 "$B/ft-bench-gemv-cuda" --tiled --no-sweep $m > "$f" 2>&1; echo "rc=$?" >> "$f"
  grep -E "^\| tiled|read bandwidth|rc=" "$f" | cut -c1-200
done
log "ft-bench-gemv-cuda --tiled (sweep) --copies 1"
timeout 120 "$B/ft-bench-gemv-cuda" --tiled --copies 1 > "$R/gemv_sweep_copies1.txt" 2>&1; echo "rc=$?" >> "$R/gemv_sweep_copies1.txt"
# The plain read of the same bytes from L2 (the SOL table at one copy): L2's own rate bounds what the GEMV from L2
# can show, so the GEMV's L2 time is judged against it as well as against the H200's HBM time.
log "ft-bench-gemv-cuda --sol --copies 1"
timeout 90 "$B/ft-bench-gemv-cuda" --sol --copies 1 > "$R/gemv_sol_copies1.txt" 2>&1; echo "rc=$?" >> "$R/gemv_sol_copies1.txt"
grep -E "^\| [0-9]|rc=" "$R/gemv_sol_copies1.txt" | cut -c1-160
wait
python3 bench/sass_loop.py "$R/sass_mma.txt.gz" --kernel nvfp4_mma_kernel > "$R/sass_loops.txt" 2>&1; head -40 "$R/sass_loops.txt"
S=("FT_GLU_ORDER=0" "FT_ATTN_PRE_L1=1" "FT_ATTN_ROPE=0" "FT_ATTN_STAGE_KEYS=64" "FT_GEMV_RS_EARLY=0" "FT_GEMV_Y_EARLY=0"
   "FT_GEMV_NVFP4_LEAN_DENSE=0")
AB_BUDGET=230 ab_envs 2 "$L" "-" "${S[@]}" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
finish res1
