#!/usr/bin/env bash
# Session 10, call 3: the CPU rows' fixed cost at 2 routes (hybrid's CPU share): prefetch
# modes, items per thread, pages, schedules. 15 threads, 128 NVFP4 experts, 1 GiB bank.
R=/tmp/resS
source bench/device_common.sh
b() {  # label [VAR=value ...] -- bench args
  local lab=$1; shift
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  echo "$lab: $(env "${envs[@]}" FT_X=1 $B/ft-bench-moe-cpu --threads ${TH:-15} --types nvfp4 --isas avx512 --mib 1024 --iters 300 --rounds 2 "$@" 2>&1 | grep -E "exact" | tr -s ' ' | tr '\n' ' ')" | tee -a $R/small.txt
}
for u in 2 8; do
  b "u$u base" -- --n-used $u
  for p in next2 next-128 next-l2 row none; do b "u$u pf $p" -- --n-used $u --prefetch $p; done
  for it in 2 4 16; do b "u$u items $it" FT_MOE_CPU_ITEMS=$it -- --n-used $u; done
  b "u$u pages 2m" -- --n-used $u --bank-pages 2m
  b "u$u sched items,guided" -- --n-used $u --sched items,guided
done
b "u1 base" -- --n-used 1
b "u1 items 2" FT_MOE_CPU_ITEMS=2 -- --n-used 1
TH=8 b "u2 threads 8" -- --n-used 2
finish resS
