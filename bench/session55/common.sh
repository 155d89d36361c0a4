# Sourced by session 55's call scripts after bench/device_common.sh.
# serve_check: ft serve on $L (Llama-8B NVFP4) -- its load log's warm-up lines (session 54's mend: one, the batch
# runner's) and lane-major line, and one /completion request's reply (token ids: the synthetic model has no vocabulary).
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
