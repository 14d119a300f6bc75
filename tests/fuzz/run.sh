#!/usr/bin/env bash
# Runs every fuzz target for a fixed budget on the stable toolchain and prints what each did:
#   bash tests/fuzz/run.sh [SECONDS_PER_TARGET]      (default 20)
#   1. installs cargo-fuzz when missing (`cargo install cargo-fuzz --locked`),
#   2. builds every target once (`cargo fuzz build -O --sanitizer none`: libFuzzer's coverage without a
#      sanitizer, which needs no nightly),
#   3. runs each target for the budget from its seed corpus (corpus/<target>/) and its regressions
#      (regressions/<target>/); new interesting inputs go to cargo-fuzz/work/<target>/corpus (not checked in),
#   4. copies every crash, timeout and out-of-memory input to regressions/<target>/ (commit them: `cargo test`
#      replays them from there, see tests/replay.rs), then prints a table of executions and findings.
# Exits non-zero when any target found something. FUZZ_TARGETS="a b" runs only those targets.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
fuzz_dir="$here/cargo-fuzz"
budget="${1:-20}"
[[ "$budget" =~ ^[0-9]+$ ]] || { echo "usage: $0 [SECONDS_PER_TARGET]" >&2; exit 2; }

# Longest input per target: a little past each input's own limit, so the limit itself is exercised.
declare -A max_len=(
    [cel_source]=17000 [manifest]=16384 [component]=131072 [flow_v2_body]=16384 [origin_map]=8192
    [presence_envelope]=4096 [push_subscription_keys]=4096 [interaction_token]=5000 [connect_token]=5000
    [service_envelope]=8192 [service_reply]=8192
)
targets=(${FUZZ_TARGETS:-cel_source manifest component flow_v2_body origin_map presence_envelope
    push_subscription_keys interaction_token connect_token service_envelope service_reply})

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "[fuzz] installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

echo "[fuzz] building ${#targets[@]} targets (release, coverage instrumentation, no sanitizer)" >&2
started=$SECONDS
cargo fuzz build -O --sanitizer none --codegen-units 16 --fuzz-dir "$fuzz_dir"
echo "[fuzz] built in $((SECONDS - started)) s" >&2
binaries="$fuzz_dir/target/x86_64-unknown-linux-gnu/release"

status=0
rows=()
for target in "${targets[@]}"; do
    [[ -n "${max_len[$target]:-}" ]] || { echo "[fuzz] unknown target $target" >&2; exit 2; }
    work="$fuzz_dir/work/$target"
    mkdir -p "$work/corpus" "$work/artifacts" "$work/tmp" "$here/regressions/$target"
    rm -f "$work/artifacts/"*
    if [[ $target == component ]]; then
        # Real components as seeds: the guests the fixtures' build script made (not checked in: they are built).
        cp "$here/../../target/plugins/wasm32-wasip2/release/"{noop,greeter,caps}.wasm "$work/corpus/" 2>/dev/null || true
    fi
    echo "[fuzz] $target: ${budget} s" >&2
    # The scratch directories the target makes (its embedded store) live and die with this run.
    set +e
    TMPDIR="$work/tmp" "$binaries/$target" "$work/corpus" "$here/corpus/$target" "$here/regressions/$target" \
        -max_total_time="$budget" -timeout=10 -rss_limit_mb=3072 -max_len="${max_len[$target]}" \
        -print_final_stats=1 -artifact_prefix="$work/artifacts/" >"$work/log" 2>&1
    code=$?
    set -e
    rm -rf "$work/tmp"
    executions=$(awk '/stat::number_of_executed_units:/ { n = $2 } END { print n + 0 }' "$work/log")
    findings=0
    for artifact in "$work/artifacts/"*; do
        [[ -f "$artifact" ]] || continue
        findings=$((findings + 1))
        cp "$artifact" "$here/regressions/$target/"
        echo "[fuzz] $target found $(basename "$artifact"): kept in regressions/$target/" >&2
    done
    if [[ $code -ne 0 && $findings -eq 0 ]]; then
        # libFuzzer failed without an input to blame (a crash while loading the corpus, a bad flag).
        findings=1
        echo "[fuzz] $target exited $code without an artifact; see $work/log" >&2
    fi
    [[ $findings -eq 0 ]] || { status=1; tail -n 30 "$work/log" >&2; }
    echo "[fuzz] $target: $executions executions, $findings findings" >&2
    rows+=("$target $executions $findings")
done

printf '\n%-24s %12s %8s\n' target executions crashes
for row in "${rows[@]}"; do
    read -r target executions findings <<<"$row"
    printf '%-24s %12s %8s\n' "$target" "$executions" "$findings"
done
echo "[fuzz] ${#targets[@]} targets, ${budget} s each, $((SECONDS - started)) s in all"
exit "$status"
