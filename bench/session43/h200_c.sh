#!/usr/bin/env bash
# Session 43, call 3 (main with the qkv launch at 3 stages, kNvfp4AfterGemvStages): test_cuda (all), the stages
# again against 2 (the old default) and against a 72 KB floor (3 CTAs an SM), then issue 3's figures beside
# llama.cpp v0.5.0's CUDA build made in the same call:
#   ft bench -m F --device cuda -p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562
#   llama-bench -m F -p 512 -n 128 -d 0,4096,16384 -ngl 99 -fa 1 -r 2
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda; scripts/pack-llama-src.sh
#   run(command="timeout -s KILL 590 bash bench/session43/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/resc
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
llama_build_bg
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "test_cuda (all)"
gpu_tests 330
models_wait
S2="FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,2,57344"
S3="FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,3,73728"
tokens_under "$S2" "$L"
AB_BUDGET=330 ab_envs 3 "$L" "-" "$S2" "$S3" -- -p 0 -n 128 -r 2 --bw-gbs 4562
python3 - "$R/ft.md" <<'PY' | tee -a "$R/log.txt"
import re, sys, statistics
names = ["default (4,3 at 56 KB)", "4,2 at 56 KB (old)", "4,3 at 72 KB"]
v = [float(re.search(r'\|\s*tg128\s*\|\s*([0-9.]+)', l).group(1)) for l in open(sys.argv[1]) if 'tg128' in l]
for i, n in enumerate(names):
    xs = v[i::3]
    if xs: print(n, 'mean %.2f' % statistics.mean(xs), ' '.join('%.2f' % x for x in xs))
PY
llama_wait 400
ft_bench_each 470 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L $Q
llama_depth_rows 480 560 $L $Q
log "ft rows:"; cat "$R/ft.md"
log "llama rows:"; cat "$R/llama-bench.md" 2>/dev/null
finish resc
