#!/usr/bin/env bash
# Session 14, call 3: the down experts' first loads before their PDL wait (GemvArgs::ids_early;
# FT_MOE_IDS_EARLY=0 off), the down experts prefetched into L2 by the gate/up launch (prefetch_w;
# FT_MOE_DOWN_PF=0) and the gate/up experts by the router's last block (RoutePrefetch;
# FT_MOE_ROUTE_PF=0): the GEMV / MoE tests, Qwen3-30B-A3B tg128 / @d4096 alternating over all on /
# each off / all off, the same greedy tokens all on and all off.
#   run(command="timeout -s KILL 480 bash bench/session14/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
model qwen3moe-30b-nvfp4 &
(cd $B && timeout 200 ./test_cuda --gtest_brief=1 --gtest_filter='*Moe*:CudaGemv*' > $R/test_moe.txt 2>&1; echo "rc=$?" >> $R/test_moe.txt)
grep -E "tests? ran|PASSED|FAILED|rc=" $R/test_moe.txt | head -20
wait
model qwen3moe-30b-nvfp4
OFF="FT_MOE_IDS_EARLY=0 FT_MOE_DOWN_PF=0 FT_MOE_ROUTE_PF=0"
AB_BUDGET=400 ab_envs 2 $M/qwen3moe-30b-nvfp4.gguf - FT_MOE_ROUTE_PF=0 FT_MOE_DOWN_PF=0 FT_MOE_IDS_EARLY=0 "$OFF" -- \
  -p 0 -n 128 -d 0,4096 -r 2 --bw-gbs 4562
for v in 1 0; do
  e=""; [ $v = 0 ] && e=$OFF
  env $e timeout 60 "$B/ft" generate --model $M/qwen3moe-30b-nvfp4.gguf --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 \
    --max-tokens 48 --temperature 0 --ignore-eos --json > $R/gen_$v.json 2>>$R/ft.err
done
python3 -c "
import json; a=json.load(open('$R/gen_1.json'))['tokens']; b=json.load(open('$R/gen_0.json'))['tokens']
print('prefetches on / off:', 'same %d tokens' % len(a) if a == b else 'DIFFER', len(a), len(b))" 2>&1 | tee -a $R/log.txt
finish resc
