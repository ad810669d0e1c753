#!/usr/bin/env bash
# The README's test command: every Rust test of the workspace, the short reliability campaign
# (real devnet and relayer processes, 10 SIGKILLs of the relayer, one minute of ledger faults, a
# 20 s partition, the relayer's clock stepped with libfaketime, DATA_DIR full on a tmpfs, a
# damaged database; docs/RELIABILITY.md; it installs the Debian package faketime when missing and
# needs root for the tmpfs, as CI runs), then the JS tests in Node.js 22 and headless Chromium against the local
# stack (scripts/js-test.sh installs Node 22, Chromium, wasm-bindgen-cli and puppeteer-core when
# missing). Needs the Rust toolchain, a C compiler, node/npm and apt-get (for Chromium).
# `cargo test --workspace` alone is the Rust-only subset.
#
# One build, then three lanes side by side. Most of the run is waiting (blocks, batch windows, a
# compressed day), not computing: the attack lab's two forms use about a third of one core for
# six minutes. Lane 1 is the lab; lane 2 every other Rust test, then the campaign; lane 3 the JS
# tests, once the wasm module, built beside the main build at a low priority, is ready. The lanes
# run what the main build made (no second build with other features).
set -euo pipefail
cd "$(dirname "$0")/.."

# Every citation in code and documents points into the repository (docs/PROTOCOL.md §8.4 and
# the like: scripts/check-citations.py says which forms it checks).
python3 scripts/check-citations.py --self-test
python3 scripts/check-citations.py

# Errors keep their cause as a source: the number of error variants that carry a String only
# goes down (docs/ARCHITECTURE.md §5; --list names them).
python3 scripts/error-variants.py --self-test
python3 scripts/error-variants.py --max 29 >/dev/null

# The campaign steps the relayer's clock with libfaketime (the Debian package faketime).
if ! [ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] &&
  ! [ -e /usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1 ] &&
  ! [ -e /usr/lib/faketime/libfaketime.so.1 ]; then
  echo "installing libfaketime (apt-get install faketime)"
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq faketime >/dev/null
fi

stamp() { printf '\n==> %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }
LOGS=$(mktemp -d)
# Clients keep their device stores (tokens, pins, scan cache) under the data directory: the
# tests' go to a temporary one, removed at the end, never into the user's own.
export PRIVSVC_DATA_DIR="$LOGS/data"
LANE_PIDS=()
WASM_PID=
cleanup() {
  for pid in $WASM_PID "${LANE_PIDS[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done
  rm -rf "$LOGS"
}
trap cleanup EXIT

# --- the builds ---------------------------------------------------------------------------------
# The JS lane's wasm module (cargo's release profile: optimised as the published module is,
# without its fat LTO, about half the build time; a dev module is too slow for the Chromium
# checks' timeouts while the other lanes run) builds from the start, at a low priority and in its
# own target directory: it takes the CPU the main build and the other lanes leave idle, and never
# waits for cargo's lock on target/.
stamp "build: the wasm module (low priority, beside) and every test and example of the workspace (debug)"
set -m # each background job in its own process group, so that cleanup stops its children too
(
  rc=0
  PRIVSVC_JS_PROFILE=fast-release PRIVSVC_WASM_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}/wasm-pkg \
    nice -n 10 bash scripts/js-test.sh --build-only || rc=$?
  echo "$rc" >"$LOGS/wasm.rc"
) >"$LOGS/wasm" 2>&1 &
WASM_PID=$!
set +m
cargo test --workspace --no-run
echo "target: $(du -sh "${CARGO_TARGET_DIR:-target}" | cut -f1); disk: $(df -h . | tail -n 1)"
# The lab's test binary, as the build above made it.
LAB_BIN=$(cargo test --workspace --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    t = m.get("target", {})
    if m.get("reason") == "compiler-artifact" and t.get("name") == "lab" and t.get("kind") == ["test"] and m.get("executable"):
        print(m["executable"])
')
[ -x "$LAB_BIN" ] || { echo "the lab's test binary was not found"; exit 1; }

# --- three lanes ---------------------------------------------------------------------------------
# The lab's two forms run side by side, as they were tuned; clock-hour's leaky control after them,
# alone (run beside the leaky form, its 24 busy users took CPU the leaky form's timing attacks
# were tuned without: a CI run on 2026-11-30 saw issue-to-spend score 2 of 7 there).
LAB_FORMS=(the_short_form_finds_no_open_channel every_attack_wins_when_its_leak_is_on)
LAB_AFTER=clock_hour_wins_when_envelopes_take_the_device_clock
LAB_TESTS=("${LAB_FORMS[@]}" "$LAB_AFTER")
stamp "lanes: (1) the attack lab, (2) the other Rust tests then the campaign, (3) the JS tests"
set -m # each lane in its own process group, so that cleanup stops a lane's children too
lane() { local start=$SECONDS rc=0; "$@" || rc=$?; echo "(lane time: $((SECONDS - start)) s)"; return $rc; }
lab_lane() { "$LAB_BIN" "${LAB_FORMS[@]}" --exact && "$LAB_BIN" "$LAB_AFTER" --exact; }
(cd crates/privsvc-lab && lane lab_lane) >"$LOGS/lab" 2>&1 &
LANE_PIDS+=($!)
rust_lane() {
  local skips=()
  for t in "${LAB_TESTS[@]}"; do skips+=(--skip "$t"); done
  cargo test --workspace -- "${skips[@]}" &&
    # The short form: any lost or duplicated record fails it, and so does writing less than
    # half of the fault-free rate while the faults are on, or any failed check of the faults of
    # a real machine (docs/RELIABILITY.md).
    "${CARGO_TARGET_DIR:-target}/debug/examples/campaign" --no-build --kills 10 --fault-secs 60 \
      --partition-secs 20 --full-secs 15
}
(lane rust_lane) >"$LOGS/rust" 2>&1 &
LANE_PIDS+=($!)
# The JS tests, once the wasm module is built, against a stack from the debug examples built
# above.
js_lane() {
  while ! [ -f "$LOGS/wasm.rc" ]; do sleep 1; done
  cat "$LOGS/wasm"
  [ "$(cat "$LOGS/wasm.rc")" = 0 ] || { echo "the wasm build failed"; return 1; }
  PRIVSVC_JS_STACK_PROFILE=prebuilt bash scripts/js-test.sh --tests-only
}
(lane js_lane) >"$LOGS/js" 2>&1 &
LANE_PIDS+=($!)
set +m

FAILED=()
for i in 0 1 2; do
  name=(lab rust js)
  if wait "${LANE_PIDS[$i]}"; then status=passed; else status=FAILED; FAILED+=("${name[$i]}"); fi
  stamp "lane ${name[$i]}: $status"
  cat "$LOGS/${name[$i]}"
done
LANE_PIDS=()
WASM_PID=
if [ "${#FAILED[@]}" -gt 0 ]; then
  echo "failed lanes: ${FAILED[*]}"
  exit 1
fi
stamp "all lanes passed"
