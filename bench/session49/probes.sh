# Sourced by session 49's calls after bench/device_common.sh (R, B, log set).
# snap NAME: R tarred into $OUT/NAME.tgz, again after each phase -- one file comes back ($OUT returns only a few: the
# 04:28 call wrote its logs under $OUT itself and lost 4 of 12, the test log among them), and a call cut short by
# the budget still brings back what the last snap held.
snap() { tar czf "$OUT/$1.tgz" -C "$(dirname "$R")" "$(basename "$R")"; }
# The register-fed prototype and its cp.async-ring form beside the tiled kernel (checked / clean), after their
# bitwise check against it (tools/gemv_direct_proto.cuh), from HBM and from L2 (--copies 1); then L2's own read of
# the same bytes (--sol --copies 1).
direct_probes() {
  local m f
  for m in "--pool-gib 1" "--copies 1"; do
    f=$R/direct_$(echo "$m" | tr -d ' -').txt
    log "ft-bench-gemv-cuda --direct $m"
    timeout 60 "$B/ft-bench-gemv-cuda" --direct $m > "$f" 2>&1; echo "rc=$?" >> "$f"
    grep -E "^\| [0-9]|check|read|rc=" "$f" | cut -c1-200
  done
  log "ft-bench-gemv-cuda --sol --copies 1"
  timeout 60 "$B/ft-bench-gemv-cuda" --sol --copies 1 > "$R/gemv_sol_copies1.txt" 2>&1
  echo "rc=$?" >> "$R/gemv_sol_copies1.txt"
  grep -E "^\| [0-9]|rc=" "$R/gemv_sol_copies1.txt" | cut -c1-160
}
