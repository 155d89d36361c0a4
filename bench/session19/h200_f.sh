#!/usr/bin/env bash
# Session 19, call 6: what each link of the decode chain costs inside the chain -- tg128 with one
# launch kind skipped in every layer (FT_DEBUG_SKIP, garbage tokens; PDL overlap included), both
# models, main's tiling on.
#   PACK_ONLY="ft ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 400 bash bench/session19/h200_f.sh; tar czf $OUT/resf.tgz -C /tmp resf",
#       carry=[".devcarry/pack"])
R=/tmp/resf
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
models_wait
S=FT_DEBUG_SKIP
AB_BUDGET=250 ab_envs 1 $L - $S=norm1 $S=qkv $S=attn $S=wo $S=norm2 $S=gateup $S=swiglu $S=down \
  $S=norm1,attn,norm2,swiglu $S=qkv,wo,gateup,down $S=norm1,qkv,attn,wo,norm2,gateup,swiglu,down - -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=370 ab_envs 1 $Q - $S=norm1 $S=qkv $S=attn $S=wo $S=router $S=experts $S=norm1,attn,router \
  $S=norm1,qkv,attn,wo,router,experts - -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resf
