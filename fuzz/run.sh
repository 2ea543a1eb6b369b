#!/usr/bin/env bash
# Fuzz smoke (issue 6): builds the fuzz targets with libFuzzer's coverage
# instrumentation on *stable* Rust — the same rustc flags cargo-fuzz passes
# with `--sanitizer none`, so neither cargo-fuzz nor a nightly toolchain is
# needed — and runs each target for a fixed time over a scratch copy of the
# committed corpus. Any crash fails the run; its reproducer is kept in
# fuzz/artifacts/<target>/ (commit it to fuzz/regressions/<target>/, fix
# the bug kind, and carrier/tests/fuzz_corpus.rs replays it forever).
#
#   fuzz/run.sh                         # every target, 15 s each (CI)
#   RLTP_FUZZ_SECONDS=600 fuzz/run.sh json frame
#
# Prints, per target: executions, corpus size, crashes.
set -euo pipefail
cd "$(dirname "$0")"

seconds=${RLTP_FUZZ_SECONDS:-15}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(json frame proof envelope declaration shape)
fi
triple=$(rustc -vV | sed -n 's/^host: //p')
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
# An explicit --target keeps these flags off build scripts and proc macros.
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module \
 -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
 -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares \
 -Cllvm-args=-simplifycfg-branch-fold-threshold=0"

started=$(date +%s)
cargo build --release --target "$triple" --bins
echo "fuzz: targets built in $(( $(date +%s) - started )) s"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
for target in "${targets[@]}"; do
  mkdir -p "$work/$target" "artifacts/$target"
  cp corpus/"$target"/* "$work/$target/"
  log="$work/$target.log"
  status=0
  "$CARGO_TARGET_DIR/$triple/release/$target" "$work/$target" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="artifacts/$target/" -print_final_stats=1 >"$log" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  corpus=$(ls "$work/$target" | wc -l)
  if [ "$status" -eq 0 ]; then
    echo "fuzz $target: ${execs:-?} executions in ${seconds} s, corpus $corpus inputs, crashes 0"
  else
    failed=1
    echo "fuzz $target: CRASH (exit $status) after ${execs:-?} executions; reproducer(s):"
    ls -1 "artifacts/$target/" | sed 's/^/  fuzz\/artifacts\/'"$target"'\//'
    grep -E "panicked|ERROR|SUMMARY" "$log" | head -5 | sed 's/^/  /'
  fi
done
exit $failed
