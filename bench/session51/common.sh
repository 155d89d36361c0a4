# Sourced by bench/session51/h200.sh and h200_short.sh after device_common.sh: snap (what a kill at the call's limit
# leaves in $OUT) and the body both run -- lanes tests, ft-bench-gemv-cuda --direct from HBM (tiled and lanes, the
# 80% criterion), then Llama-8B and Qwen3-30B-A3B tg128 with the defaults / FT_NVFP4_LANES=1 alternating, eagerly
# loaded.
snap() { tar czf "$OUT/$(basename "$R").tgz" -C "$(dirname "$R")" "$(basename "$R")"; }

# kernels_and_ab LLAMA_UNTIL QWEN_UNTIL: the body above, each model's rounds while the call is younger than its bound.
kernels_and_ab() {
  gpu_preamble 100 'CudaNvfp4Lanes.*:GpuNvfp4Lanes.*:*Nvfp4Scan.*' llama8b-nvfp4 qwen3moe-30b-nvfp4
  local f=$R/direct_pool.txt
  timeout 70 "$B/ft-bench-gemv-cuda" --direct --pool-gib 1 > "$f" 2>&1; echo "rc=$?" >> "$f"
  grep -E "read|rc=|\| [0-9]+x[0-9]+ \| (tiled clean|lanes \(plan\)|tiled clean dep|lanes \(plan\) dep) \|" "$f" | cut -c1-110
  tokens_under "FT_NVFP4_LANES=1" "$L"
  AB_BUDGET=$1 ab_envs 5 "$L" "-" "FT_NVFP4_LANES=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
  ab_env_means "$L"
  AB_BUDGET=$2 ab_envs 3 "$Q" "-" "FT_NVFP4_LANES=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
  ab_env_means "$Q"
  snap
}
