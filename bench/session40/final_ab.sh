# Session 40's A/B inside the final call (FINAL_AB=bench/session40/final_ab.sh bench/h200_final.sh; its test_cuda
# runs CudaNormCta.* and the session test's NORM-CTA check): wo's norm CTA (FT_NORM_CTA=1, GemvArgs::nr_*: the FFN
# norm by one CTA more of the wo launch, waiting on the others' counts, instead of its own launch; rmsnorm_q8's
# bytes) against the default; its issue-3 row (depths, pp512) on Llama-8B; then the launch plans of
# bench/h200_plans.sh again (after the SwiGLU block order and the early norm weights) while time allows.
tokens_under "FT_NORM_CTA=1" "$L"
AB_BUDGET=400 ab_envs 5 "$L" - "FT_NORM_CTA=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
log "ft bench FT_NORM_CTA=1 $(basename "$L")"
FT_NORM_CTA=1 timeout 100 "$B/ft" bench -m "$L" --device cuda -p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562 \
  2>>"$R/ft.err" | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a "$R/ft.md"
AB_BUDGET=455 ab_envs 1 "$L" - \
  FT_GEMV_NVFP4_TILED_PLAN=28672x4096=4,3 FT_GEMV_NVFP4_TILED_PLAN=28672x4096=8,2 \
  FT_GEMV_NVFP4_TILED_PLAN=4096x14336=8,3 FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,3 \
  FT_GEMV_NVFP4_DENSE_PLAN=1,0 FT_GEMV_NVFP4_DENSE_PLAN=2,0,4 \
  -- -p 0 -n 128 -r 2 --bw-gbs 4562
