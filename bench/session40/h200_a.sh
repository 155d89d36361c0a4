#!/usr/bin/env bash
# Session 40 call 1: the norm fold's producer tails load their norm weights before the PDL wait (norm_fold::weight_of)
# instead of after the sums (a DRAM miss at the end of the producer). ft = this session's build, ft_base = main
# 9e6d956's (the tails' late load). Greedy tokens against the base (the same bits expected), then Llama-8B tg128
# alternating: base / new, each with the default attention-norm fold (FT_NORM_FOLD=2) and with both folds (3).
#   PACK_ONLY="ft ft-bigmodel" PACK_EXTRA=/tmp/ft_base scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 400 bash bench/session40/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4
models_wait
tokens_under "FTBIN=ft_base" "$L"
tokens_under "FT_NORM_FOLD=3" "$L"
tokens_under "FTBIN=ft_base FT_NORM_FOLD=3" "$L"
AB_BUDGET=330 ab_envs 6 "$L" "FTBIN=ft_base" - "FTBIN=ft_base FT_NORM_FOLD=3" "FT_NORM_FOLD=3" -- -p 0 -n 128 -r 2 --bw-gbs 4562
finish resa
