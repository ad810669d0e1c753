#!/usr/bin/env bash
# The README's test command: every Rust test of the workspace, then the short reliability
# campaign (real devnet and relayer processes, 10 SIGKILLs of the relayer, one minute of ledger
# faults; docs/RELIABILITY.md). Needs only the Rust toolchain and a C compiler.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace

# The short form's one minute of faults holds the same two devnet restarts as the full form's
# three, so its rate bar is 0.35 of the fault-free rate (the full form is held to 0.5). Any lost
# or duplicated record fails it.
cargo run --quiet --example campaign -- --kills 10 --fault-secs 60 --min-ratio 0.35
