#!/usr/bin/env bash
# Session 56: an H200 only. Any other GPU: say which and stop at once (a fresh start is ~90 s of device time,
# the H100 path of bench/session55/call1.sh already ran this session: test_cuda 344/344, lanes 0 / 96, one warm-up).
#   run(command="timeout -s KILL 570 bash bench/session56/try_h200.sh [short|min]", carry=[".devcarry/pack"], kind="nvidia-h200")
# "short": bench/session56/h200_short.sh (~390 s), "min": h200_short.sh min (~290 s), else session 55's h200.sh (~480 s).
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ $GPU == *H200* ]]; then
  case "${1:-}" in short | min) exec bash bench/session56/h200_short.sh "$1" ;; esac
  exec bash bench/session55/h200.sh
fi
echo "GPU: $GPU -- not an H200, nothing run"
