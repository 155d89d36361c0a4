#!/usr/bin/env bash
# Session 8 final device call A (after call B, on the warm machine): GPU parity per config
# (fresh test_parity, 10 configs at a time), test_moe_cpu on the Xeon host, offload / hybrid /
# cpu decode with a 512-token prompt and --stats (the cost model's copies), host memory at
# load against the banks + non-expert weights, pp8192 with the experts in host RAM.
R=/tmp/resA
source bench/device_common.sh
nvidia-smi -L
log parity
mkdir -p $R/parity
(cd $B && ./test_parity --gtest_list_tests --gtest_filter='Models/Parity.*' | awk '/^  /{split($1,a,"/"); print a[2]}' > $R/parity/list.txt
 cat $R/parity/list.txt | xargs -P 10 -I{} sh -c 'FT_PARITY_DEVICE=cuda FT_PARITY_MODELS=/tmp/ftp-{} timeout 200 ./test_parity --gtest_filter="Models/Parity.*/{}" > '$R'/parity/{}.txt 2>&1; echo "{} rc=$?" >> '$R'/parity/rc.txt')
awk '{print $2}' $R/parity/rc.txt | sort | uniq -c
grep -l "FAILED" $R/parity/*.txt | head
log test_moe_cpu
(cd $B && timeout 60 ./test_moe_cpu --gtest_brief=1 > $R/test_moe_cpu.txt 2>&1; echo "test_moe_cpu rc=$?"; grep -E "tests? ran|PASSED|FAILED" $R/test_moe_cpu.txt | tail -4)
model qwen3moe-30b-nvfp4; Q=$M/qwen3moe-30b-nvfp4.gguf
P=$(seq -s, 1000 1511)
for be in offload hybrid; do
  log "ft generate --stats $be 0.5 (512-token prompt, 128 tokens)"
  timeout 80 "$B/ft" generate --model $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 --prompt-tokens $P \
    --max-tokens 128 --ignore-eos --temperature 0 --stats > $R/gen_$be.txt 2>&1
  grep -E "host memory|host banks|cuda memory" $R/gen_$be.txt | head -3
  grep -v "^\[info\] load" $R/gen_$be.txt | tail -8
done
log "pp8192 with the experts in host RAM"
timeout 60 "$B/ft" bench -m $Q --device cuda --moe-backend cpu -p 512,8192 -n 0 -r 1 2>$R/pp8k.err | tail -2 | tee -a $R/moe.md
grep -h "micro-batch\|cuda memory\|host memory" $R/pp8k.err | sort -u | head -4
grep -h "^PARITY" $R/parity/*.txt | sed 's/^PARITY device=cuda //' > $R/parity_lines.txt; wc -l < $R/parity_lines.txt
grep -h -A4 "Failure" $R/parity/*.txt | head -30
finish resA
