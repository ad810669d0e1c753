#!/usr/bin/env bash
# The client in wasm32: builds every crate a client needs for `wasm32-unknown-unknown` (no
# servers: no axum, hyper servers, rusqlite, tower-http or tokio's network runtime) and lints
# them for that target. Installs the target when it is missing. Needs only rustup and cargo.
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
cargo clippy --target "$TARGET" --no-default-features "${CRATES[@]}" -- -D warnings

# None of the server stacks may be in the client's graph.
forbidden='^(axum|hyper-util|rusqlite|tower-http|mio) '
if cargo tree --target "$TARGET" --no-default-features -e normal --prefix none "${CRATES[@]}" \
    | grep -E "$forbidden"; then
    echo "wasm-check: a server dependency is in the client's wasm32 graph (above)" >&2
    exit 1
fi
echo "wasm-check: the client crates build for $TARGET"
