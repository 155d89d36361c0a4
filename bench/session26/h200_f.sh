#!/usr/bin/env bash
# Session 26, call 7 (binaries of wip/s26-x4: FT_MMA_X4, the one-pass activation load on the 4-warp tiled instances
# sized to k 4096 -- 4 fragments and 1 scale a thread; call 4's one pass there held 8 and 4 and lost): all GPU tests,
# tokens, Llama-8B tg128 alternating. (After a refusal left 389 s of device time: the GEMV and GPU-vs-CPU tests only.)
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 230 bash bench/session26/h200_f.sh; tar czf $OUT/resg.tgz -C /tmp resg",
#       carry=[".devcarry/pack"])
R=/tmp/resg
source bench/device_common.sh
models_bg llama8b-nvfp4
log "test_cuda (GEMV, tiled, GPU vs CPU)"
gpu_tests 120 'CudaNvfp4Tiled.*:CudaGemv*:*GpuVsCpu*' 
models_wait
for v in 0 1; do
  FT_MMA_X4=$v timeout 60 "$B/ft" generate --model $L --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 24 \
    --temperature 0 --ignore-eos --json 2>/dev/null | grep -o '"tokens":\[[^]]*\]' > "$R/gen_$v.txt"
  log "x4 $v: $(cat "$R/gen_$v.txt")"
done
AB_BUDGET=200 ab_envs 4 $L FT_MMA_X4=0 FT_MMA_X4=1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resg
