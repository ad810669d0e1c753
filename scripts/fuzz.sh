#!/usr/bin/env bash
# Fuzz every target of fuzz/ one after the other, on the stable toolchain, and print and record
# executions and crashes per target.
#
#   scripts/fuzz.sh                      # 60 s per target, every target
#   scripts/fuzz.sh 300                  # 300 s per target
#   scripts/fuzz.sh 120 ledger_execute devnet_query
#
# Environment: FUZZ_TARGET_DIR (build directory, default fuzz/target; keep it apart from the
# main workspace's, the flags differ), FUZZ_TOOLCHAIN (default stable).
#
# Installs cargo-fuzz (`cargo install --locked cargo-fuzz`) when missing. No nightly toolchain
# is needed: cargo-fuzz's instrumented build runs on stable with RUSTC_BOOTSTRAP=1 and
# `--sanitizer none` (AddressSanitizer adds nothing to `forbid(unsafe_code)` crates). The build
# keeps debug assertions and overflow checks on, so an arithmetic overflow is a crash.
#
# New inputs go to fuzz/corpus/<target>/, crashes to fuzz/artifacts/<target>/ (neither is
# committed). The table is printed and written to fuzz/last-run.md (not committed either).
# Exit status 1 when a target crashed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/fuzz"

secs="${1:-60}"
shift || true
toolchain="${FUZZ_TOOLCHAIN:-stable}"
target_dir="${FUZZ_TARGET_DIR:-$root/fuzz/target}"
triple="$(rustc +"$toolchain" -vV | sed -n 's/^host: //p')"

if ! command -v cargo-fuzz >/dev/null 2>&1; then
    echo "cargo-fuzz not found; installing it from crates.io" >&2
    cargo install --locked cargo-fuzz
fi

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^privsvc-fuzz$')
fi

echo "building ${#targets[@]} targets (toolchain $toolchain, $target_dir)" >&2
# The main workspace's CARGO_TARGET_DIR must not leak in: the instrumentation flags differ.
# `cargo fuzz build` without a target name builds every target.
env -u CARGO_TARGET_DIR RUSTC_BOOTSTRAP=1 cargo +"$toolchain" fuzz build \
    --sanitizer none --target-dir "$target_dir" >&2
bin_dir="$target_dir/$triple/release"

max_len() {
    case "$1" in
        parse_envelope | relayer_submit) echo 20000 ;;
        *) echo 9000 ;;
    esac
}

report="$root/fuzz/last-run.md"
crashed=0
rows=()
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
    log="$(mktemp)"
    before="$(ls "artifacts/$t" | wc -l)"
    echo "fuzzing $t for ${secs}s" >&2
    set +e
    "$bin_dir/$t" "corpus/$t" "seeds/$t" -max_total_time="$secs" -max_len="$(max_len "$t")" \
        -timeout=10 -artifact_prefix="artifacts/$t/" -print_final_stats=1 >"$log" 2>&1
    status=$?
    set -e
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)"
    rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)"
    after="$(ls "artifacts/$t" | wc -l)"
    if [ "$status" -ne 0 ] || [ "$after" -gt "$before" ]; then
        crashed=1
        found="$(ls -t "artifacts/$t" | head -n1)"
        result="CRASH (exit $status) artifacts/$t/$found"
        grep -m3 -E 'panicked|ERROR: libFuzzer' "$log" >&2 || true
    else
        result="no crash"
    fi
    rows+=("| \`$t\` | $secs | ${execs:-?} | ${rate:-?} | $result |")
    rm -f "$log"
done

{
    echo "Fuzzing run of $(date -u +%Y-%m-%dT%H:%MZ), \`scripts/fuzz.sh $secs\` ($(nproc) cores, toolchain $toolchain)."
    echo
    echo "| Target | Seconds | Executions | Exec/s | Result |"
    echo "|-|-|-|-|-|"
    printf '%s\n' "${rows[@]}"
} | tee "$report"
exit "$crashed"
