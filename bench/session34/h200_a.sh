#!/usr/bin/env bash
# Session 34, call 1: the tensor-core decode attention (depth >= 256 keys) with a per-warp K/V ring in
# shared memory (FT_ATTN_MMA_STAGES 0 = as before, 2, 3) and the rope + KV store inside it
# (FT_ATTN_MMA_ROPE; before: a qk_norm_rope_store launch first). The attention / session tests, greedy
# tokens after a 300-token prompt under each setting against the default, then tg128 at depth 4096 and
# 16384 alternating over the settings on Llama-8B and Qwen3-30B-A3B.
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "attention / session tests"
gpu_tests 200 'CudaAttention.*:GpuAttentionMma.*:*Rope*:CudaKv*'
models_wait
P=$(python3 -c "print(','.join(str(1 + (i * 7919) % 30000) for i in range(300)))")
deep_tokens() {  # deep_tokens "ENV=V.." FILE: 48 greedy tokens after the 300-token prompt
  local e=$1 f=$2 t
  t=$(echo "$e" | tr ' =,' '__.')
  [ "$e" = "-" ] && e=""
  env $e timeout 60 "$B/ft" generate --model "$f" --device cuda --prompt-tokens "$P" --max-tokens 48 \
    --temperature 0 --ignore-eos --json > "$R/deep_$(basename "$f" .gguf)_$t.json" 2>>"$R/ft.err"
}
for f in "$L" "$Q"; do
  b=$(basename "$f" .gguf)
  for e in - "FT_ATTN_MMA_STAGES=0 FT_ATTN_MMA_ROPE=0" "FT_ATTN_MMA_STAGES=3" "FT_ATTN_MMA_ROPE=0"; do deep_tokens "$e" "$f"; done
  python3 - "$R" "$b" <<'PY' | tee -a "$R/log.txt"
import glob, json, sys
r, b = sys.argv[1], sys.argv[2]
ref = json.load(open(f"{r}/deep_{b}_-.json"))["tokens"]
for p in sorted(glob.glob(f"{r}/deep_{b}_*.json")):
    t = json.load(open(p))["tokens"]
    n = next((i for i, (x, y) in enumerate(zip(t, ref)) if x != y), min(len(t), len(ref)))
    print(b, p.split(b + "_")[-1], "same %d tokens" % len(t) if t == ref else "DIFFER at %d" % n)
PY
done
AB_BUDGET=380 ab_envs 2 "$L" "FT_ATTN_MMA_STAGES=0 FT_ATTN_MMA_ROPE=0" "FT_ATTN_MMA_STAGES=0" "FT_ATTN_MMA_ROPE=0" - \
  "FT_ATTN_MMA_STAGES=3" -- -p 0 -n 128 -d 4096,16384 -r 2 --bw-gbs 4562
AB_BUDGET=520 ab_envs 2 "$Q" "FT_ATTN_MMA_STAGES=0 FT_ATTN_MMA_ROPE=0" - "FT_ATTN_MMA_STAGES=3" -- \
  -p 0 -n 128 -d 4096,16384 -r 2 --bw-gbs 4562
finish resa
