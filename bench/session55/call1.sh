#!/usr/bin/env bash
# Session 55 call 1 (~420 s, any GPU). On an H200: session 54's h200_next.sh (issue 3's table with the lanes rule's
# first GPU run), then ft serve's single warm-up. Elsewhere: test_cuda (all), the lanes rule on this GPU (the load
# log's "lane-major" line, default and FT_NVFP4_LANES=1), ft serve's single warm-up (session 54's mend, never run on a
# GPU): the server log must show one warm-up, of the batch runner, and a request must answer.
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda ft-bench-batch" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/session55/call1.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
serve_check() {  # the server's load log; one completion request
  local p=18931 i
  "$B/ft" serve --model "$L" --device cuda --port $p > "$R/serve.txt" 2>&1 &
  local pid=$!
  local body='{"prompt":[1,2,3],"n_predict":8,"temperature":0}'
  for ((i = 0; i < 120; ++i)); do  # bash's /dev/tcp: the machine may lack curl
    (exec 3<>/dev/tcp/127.0.0.1/$p && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && timeout 5 cat <&3) 2>/dev/null |
      head -1 | grep -q " 200" && break
    sleep 0.5
  done
  (exec 3<>/dev/tcp/127.0.0.1/$p && printf 'POST /completion HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
    ${#body} "$body" >&3 && timeout 20 cat <&3) > "$R/serve_reply.json" 2>&1
  kill $pid; wait $pid
  log "serve: $(grep -c 'warm-up' "$R/serve.txt") warm-up line(s):"
  grep -E "warm-up|lane-major" "$R/serve.txt" | cut -c1-160 | tee -a "$R/log.txt"
  log "serve reply: $(head -c 300 "$R/serve_reply.json")"
}
if [[ $GPU == *H200* ]]; then
  timeout -s KILL 480 bash bench/session54/h200_next.sh
  R=/tmp/res55h
  source bench/device_common.sh
  serve_check
  finish res55h
  exit 0
fi
R=/tmp/res55a
source bench/device_common.sh
log "GPU: $GPU"
models_bg llama8b-nvfp4
log "test_cuda (all)"
gpu_tests_until 240
grep -E "Failure|FAILED" "$R/test_all.txt" | head -20
models_wait
for e in "" "FT_NVFP4_LANES=1"; do
  log "generate ${e:-default}"
  env $e timeout 60 "$B/ft" generate --model "$L" --device cuda --prompt-tokens 1,2,3 --max-tokens 16 \
    --temperature 0 > "$R/gen_${e:-default}.txt" 2>&1
  grep -E "lane-major|warm-up" "$R/gen_${e:-default}.txt" | cut -c1-160 | tee -a "$R/log.txt"
  tail -2 "$R/gen_${e:-default}.txt" | cut -c1-200 | tee -a "$R/log.txt"
done
serve_check
finish res55a
