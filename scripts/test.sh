#!/usr/bin/env bash
# The README's test command: every Rust test of the workspace, the short reliability campaign
# (real devnet and relayer processes, 10 SIGKILLs of the relayer, one minute of ledger faults;
# docs/RELIABILITY.md), then the JS tests in Node.js 22 and headless Chromium against the local
# stack (scripts/js-test.sh installs Node 22, Chromium, wasm-bindgen-cli and puppeteer-core when
# missing). Needs the Rust toolchain, a C compiler, node/npm and apt-get (for Chromium).
# `cargo test --workspace` alone is the Rust-only subset.
set -euo pipefail
cd "$(dirname "$0")/.."

# Every citation in code and documents points into the repository (docs/PROTOCOL.md §8.4 and
# the like: scripts/check-citations.py says which forms it checks).
python3 scripts/check-citations.py

cargo test --workspace

# The short form: any lost or duplicated record fails it, and so does writing less than half
# of the fault-free rate while the faults are on (docs/RELIABILITY.md).
cargo run --quiet --example campaign -- --kills 10 --fault-secs 60

# The stack for the JS tests runs from the debug examples `cargo test` just built; the wasm
# module is built in release (its crypto is too slow unoptimised).
PRIVSVC_JS_STACK_PROFILE=${PRIVSVC_JS_STACK_PROFILE:-dev} bash scripts/js-test.sh
