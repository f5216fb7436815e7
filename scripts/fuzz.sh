#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (+ASan/UBSan) and runs each one for
# a fixed time with a fixed seed, starting from a corpus made of the test data
# and fuzz/corpus/ (hand-written seeds, including one reproducer per
# defect fixed so far), with fuzz/json.dict as the mutation dictionary.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 60)
# A crash leaves its input under build-fuzz/artifacts/<target>/ and fails the
# script; turn such inputs into regression tests in the mirrored tests/<module>/
# folder (tests/io, tests/policy, tests/model, tests/pipeline, tests/sched).
# build-fuzz/corpus/<target> keeps what earlier runs found; delete it to start
# from the seeds alone.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
scripts/setup.sh --fuzz
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTEPMIX_BUILD_FUZZ=ON \
  -DSTEPMIX_BUILD_TESTS=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
  >/dev/null
targets=(fuzz_safetensors fuzz_index fuzz_policy)
for extra in fuzz/fuzz_*.cpp; do
  t=$(basename "$extra" .cpp)
  [[ " ${targets[*]} " == *" $t "* ]] || targets+=("$t")
done
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]}"

golden=tests/data/golden/cosmos3-tiny
seed_corpus() {  # target -> files that seed it
  case $1 in
    fuzz_safetensors) find tests/data fuzz/corpus/safetensors -name '*.safetensors' -size -100k ;;
    fuzz_index) find fuzz/corpus/index -name '*.json' ;;
    fuzz_policy) find $golden -name 'config.json'; find fuzz/corpus/policy -name '*.json' ;;
    fuzz_model_config) find $golden -name 'config.json'; find fuzz/corpus/model_config -name '*.json' ;;
    fuzz_scheduler_config) find $golden/scheduler fuzz/corpus/scheduler -name '*.json' ;;
    fuzz_tokenizer) find fuzz/corpus/tokenizer models -name '*.json' -path '*tokenizer*' ;;
  esac
  return 0
}

status=0
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t
  artifacts=build-fuzz/artifacts/$t
  mkdir -p "$corpus" "$artifacts"
  { seed_corpus "$t" 2>/dev/null || true; } | while read -r f; do cp "$f" "$corpus/$(echo "$f" | tr / _)"; done
  echo "fuzz: $t for ${seconds}s"
  if ! ASAN_OPTIONS=allocator_may_return_null=1 "build-fuzz/fuzz/$t" "$corpus" -seed=1 -max_total_time="$seconds" \
      -dict=fuzz/json.dict -rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$artifacts/" -print_final_stats=1 2>"build-fuzz/$t.log"; then
    echo "fuzz: $t FAILED (see build-fuzz/$t.log and $artifacts/)"
    status=1
  else
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "build-fuzz/$t.log")
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "build-fuzz/$t.log")
    cov=$(grep -o 'DONE .*' "build-fuzz/$t.log" | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' | tail -1)
    echo "fuzz: $t clean: $runs inputs, $cov, peak RSS $rss MB"
  fi
done
exit $status
