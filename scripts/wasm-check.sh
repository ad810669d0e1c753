#!/usr/bin/env bash
# The client in wasm32: builds every crate a client needs for `wasm32-unknown-unknown` (no
# servers: no axum, hyper servers, rusqlite, tower-http or tokio's network runtime), lints them
# for that target, and runs the wasm tests of privsvc-rt and privsvc-vault in Node.js (timers,
# tasks, clock, randomness, bounded fetch that refuses redirects against a local HTTP server;
# key derivation with a wallet that is not Send). Installs the
# target, and wasm-bindgen-cli at the version of Cargo.lock's wasm-bindgen, when missing.
# Needs rustup, cargo, node (18 or later) and python3.
#
#   bash scripts/wasm-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=wasm32-unknown-unknown
if ! rustup target list --installed | grep -qx "$TARGET"; then
    rustup target add "$TARGET"
fi
rustup component add clippy >/dev/null 2>&1 || true

# The client and every crate below it (the crates with servers without their `server` feature).
CRATES=(
    -p privsvc-rt
    -p privsvc-attributes
    -p privsvc-envelope
    -p privsvc-vault
    -p privsvc-fingerprint
    -p privsvc-ledger
    -p privsvc-tokens
    -p privsvc-ohttp
    -p privsvc-client
)

# getrandom 0.3's web backend needs this cfg; .cargo/config.toml sets it for the target, but
# RUSTFLAGS from the environment replace that setting, so add it there when RUSTFLAGS is set.
if [ -n "${RUSTFLAGS:-}" ]; then
    export RUSTFLAGS="$RUSTFLAGS --cfg getrandom_backend=\"wasm_js\""
fi

cargo build --target "$TARGET" --no-default-features "${CRATES[@]}"
# In wasm32 the shared traits carry no `Send + Sync` (privsvc_rt::MaybeSend), so the `Arc`s kept
# for the native API hold non-`Send` values there: one thread, nothing to warn about. The
# bindings of the JS package (privsvc-wasm, a wasm32-only crate) are linted with them.
cargo clippy --target "$TARGET" --no-default-features "${CRATES[@]}" -p privsvc-wasm -- -D warnings \
    -A clippy::arc_with_non_send_sync

# None of the server stacks may be in the client's graph.
forbidden='^(axum|hyper-util|rusqlite|tower-http|mio) '
if cargo tree --target "$TARGET" --no-default-features -e normal --prefix none "${CRATES[@]}" \
    | grep -E "$forbidden"; then
    echo "wasm-check: a server dependency is in the client's wasm32 graph (above)" >&2
    exit 1
fi

# privsvc-rt's wasm backends, run for real in Node.js.
WB_VERSION=$(grep -A1 '^name = "wasm-bindgen"$' Cargo.lock | sed -n 's/^version = "\(.*\)"$/\1/p')
# The same place scripts/js-test.sh installs it, so a test run installs it once.
TOOLS="$PWD/js/.tools/cargo"
export PATH="$TOOLS/bin:$PATH"
if [ "$(wasm-bindgen-test-runner --version 2>/dev/null | awk '{print $2}')" != "$WB_VERSION" ]; then
    # --locked first; the registry index may lack a version the CLI's own lock file names, then
    # resolve afresh (the CLI version itself stays pinned).
    cargo install --locked --root "$TOOLS" wasm-bindgen-cli --version "$WB_VERSION" \
        || cargo install --root "$TOOLS" wasm-bindgen-cli --version "$WB_VERSION"
fi
python3 scripts/wasm/test_server.py > "${TMPDIR:-/tmp}/privsvc-wasm-server.port" &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
    PORT=$(cat "${TMPDIR:-/tmp}/privsvc-wasm-server.port" 2>/dev/null || true)
    [ -n "$PORT" ] && break
    sleep 0.1
done
[ -n "$PORT" ] || { echo "wasm-check: the test HTTP server did not start" >&2; exit 1; }
PRIVSVC_RT_TEST_SERVER="http://127.0.0.1:$PORT" \
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
    cargo test --target "$TARGET" -p privsvc-rt -p privsvc-vault --test wasm

echo "wasm-check: the client crates build for $TARGET and their wasm tests pass in Node.js"
