#!/usr/bin/env bash
# `make fuzz`: every fuzz target under libFuzzer (cargo-fuzz) for FUZZ_SECONDS each, one at a
# time; prints executions per target and exits non-zero if any target crashed.
#
# Stable Rust is enough: with `-s none` (no address sanitizer, which needs -Zsanitizer)
# cargo-fuzz passes rustc only stable flags (-Cpasses=sancov-module, -Cllvm-args=...), so
# neither nightly nor RUSTC_BOOTSTRAP is needed. `-a` keeps debug assertions and overflow
# checks on, as in `cargo test`: an arithmetic overflow on input is a finding. The limits
# the issue sets hold without a sanitizer: one allocation over 64 MiB aborts inside the
# target (fuzz/src/cap.rs), and libFuzzer's -rss_limit_mb bounds the whole process.
#
# FUZZ_SECONDS (default 600), FUZZ_TARGETS (default: all), FUZZ_TIMEOUT (seconds one input
# may take, default 10). New inputs that reach new code go to fuzz/corpus/<target>/; a
# crash is saved in fuzz/artifacts/<target>/ (see docs/fuzzing.md).
#
# `scripts/fuzz.sh <cargo-fuzz command> ARGS...` runs that command with the same build
# settings instead (so it reuses the build), e.g. `scripts/fuzz.sh cmin rls_answer` or
# `scripts/fuzz.sh run rls_answer fuzz/artifacts/rls_answer/crash-...` to reproduce.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-600}
timeout=${FUZZ_TIMEOUT:-10}
targets=${FUZZ_TARGETS:-"filter_config rls_answer descriptors server_config server_request usage_stream http2_frames"}

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked || exit 1
# The workspace release profile has `lto = true` (for the wasm module); under LTO the
# coverage pass never reaches the dependencies, so libFuzzer would see only the target.
export CARGO_PROFILE_RELEASE_LTO=false
settings=(--sanitizer none --release --debug-assertions --features libfuzzer)
if [ $# -gt 0 ]; then
    command=$1
    shift
    exec cargo fuzz "$command" "${settings[@]}" "$@"
fi
fuzz=(cargo fuzz run "${settings[@]}")

failed=0
summary=()
for target in $targets; do
    corpus=fuzz/corpus/$target
    mkdir -p "$corpus" "fuzz/artifacts/$target"
    # Reproducers are read as extra seeds but never written to.
    extra=()
    [ -d "fuzz/regressions/$target" ] && extra=("fuzz/regressions/$target")
    log=fuzz/artifacts/$target/last-run.log
    echo "== $target: ${seconds}s (log: $log)"
    "${fuzz[@]}" "$target" "$corpus" "${extra[@]}" -- \
        -max_total_time="$seconds" -timeout="$timeout" \
        -rss_limit_mb=1024 -malloc_limit_mb=64 -print_final_stats=1 >"$log" 2>&1
    status=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    if [ "$status" -eq 0 ]; then
        result=ok
    else
        result="CRASH (exit $status): $(grep -m 1 -E 'ERROR|panicked|deadly signal|Test unit written' "$log")"
        failed=1
        tail -n 30 "$log"
    fi
    summary+=("$(printf '%-16s %12s execs %8s exec/s  %s' "$target" "${execs:-?}" "${rate:-?}" "$result")")
done

echo
printf '%s\n' "${summary[@]}"
exit "$failed"
