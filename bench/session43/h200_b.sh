#!/usr/bin/env bash
# Session 43, call 2: the qkv GEMV's ring (6144x4096, released under the down projection, capped at 4 CTAs an SM by
# its 56 KB floor) at 4 stages -- every step of a warp in flight at once -- with the floor kept (session 41's "4,3"
# dropped it: FT_GEMV_NVFP4_TILED_PLAN's SMEM field was left 0), and with PRE 1 (one stage before the PDL wait, the
# rest right after it: FT_MMA_PRE1=1). Binaries of build-cuda:
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/session43/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/resb
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4
models_wait
P4="FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,4,57344"
P3="FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,3,57344"
tokens_under "$P4" "$L"
tokens_under "$P4 FT_MMA_PRE1=1" "$L"
(cd "$B" && FT_MMA_PRE1=1 FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,4,57344 timeout 60 ./test_cuda --gtest_brief=1 \
  --gtest_filter='CudaNvfp4Tiled.*:CudaGemvNvfp4.*' 2>&1 | tail -4) | tee -a "$R/log.txt"
AB_BUDGET=270 ab_envs 5 "$L" "-" "$P4" "$P4 FT_MMA_PRE1=1" "$P3" -- -p 0 -n 128 -r 2 --bw-gbs 4562
python3 - "$R/ft.md" <<'PY' | tee -a "$R/log.txt"
import re, sys, statistics
names = ["default", "4,4 floor", "4,4 floor PRE1", "4,3 floor"]
v = [float(re.search(r'\|\s*tg128\s*\|\s*([0-9.]+)', l).group(1)) for l in open(sys.argv[1]) if 'tg128' in l]
for i, n in enumerate(names):
    xs = v[i::4]
    if xs: print(n, 'mean %.2f' % statistics.mean(xs), ' '.join('%.2f' % x for x in xs))
PY
finish resb
