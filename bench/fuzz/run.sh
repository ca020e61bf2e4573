#!/bin/sh
# Builds the fuzz targets with clang, libFuzzer, ASan and UBSan in their own build folder and
# runs each for SECONDS (default 75: 10 minutes in all for the eight), one after the other,
# starting from a copy of the committed corpus (tests/fuzz/corpus). Prints executions, new
# corpus entries and any crash per target.
#   bench/fuzz/run.sh [SECONDS] [BUILD_DIR=build-fuzz]
#   TARGETS="metric_parser_fuzz checkpoint_fuzz" bench/fuzz/run.sh 60   (a subset)
set -eu
seconds=${1:-75}
build=${2:-build-fuzz}
src=$(cd "$(dirname "$0")/../.." && pwd)
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fsanitize=fuzzer-no-link -g -O1"
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DSEXTANT_FUZZ=ON \
  -DSEXTANT_WITH_CUDA=OFF -DSEXTANT_BUILD_BENCH=OFF \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" >/dev/null
targets=${TARGETS:-metric_parser_fuzz checkpoint_fuzz loader_fuzz npy_fuzz global_checkpoint_fuzz
worker_service_fuzz federation_service_fuzz admin_service_fuzz optuna_storage_fuzz}
# shellcheck disable=SC2086
ninja -C "$build" -j"${JOBS:-2}" $targets
echo "load: $(uptime)"
status=0
for t in $targets; do
  work="$build/fuzz-work/$t"
  rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
  cp "$src/tests/fuzz/corpus/$t/"* "$work/corpus/"
  if "$build/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1; then
    result=ok
  else
    result="FAILED (see $work/log and $work/artifacts)"
    status=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$' || true)
  [ -n "$execs" ] || execs=$(grep -Eo '#[0-9]+' "$work/log" | tail -1 | tr -d '#')
  echo "$t: ${seconds}s, executions=${execs:-?}, corpus=$(ls "$work/corpus" | wc -l), $result"
done
exit $status
