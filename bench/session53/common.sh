# Sourced by session 53's call scripts after device_common.sh: bb NAME PROMPT ENV.. -- ft-bench-batch on Llama-8B
# ($L) under ENV (eagerly loaded), its log in $R/batch_NAME_PROMPT.txt, its rows printed.
bb() {
  local name=$1 prompt=$2
  shift 2
  log "ft-bench-batch $name prompt $prompt: $*"
  env "$@" CUDA_MODULE_LOADING=EAGER timeout 90 "$B/ft-bench-batch" --model "$L" --device cuda \
    --batch 1,2,4,8 --prompt "$prompt" --steps 64 > "$R/batch_${name}_$prompt.txt" 2>&1
  grep -E "B=|Session|rror" "$R/batch_${name}_$prompt.txt"
}
