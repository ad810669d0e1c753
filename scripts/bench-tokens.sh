#!/usr/bin/env bash
# Token benchmark: privsvc's RSA-2048 blind signing and token verification rates next to
# `openssl speed rsa2048` on the same machine, one core each.
#
#   scripts/bench-tokens.sh            # 3 s per case
#   SECONDS_PER_CASE=10 scripts/bench-tokens.sh
#
# Installs Debian's `openssl` package (apt-get) only when the `openssl` command is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${SECONDS_PER_CASE:-3}"

if ! command -v openssl >/dev/null 2>&1; then
    echo "openssl not found; installing Debian's openssl package" >&2
    if [ "$(id -u)" -eq 0 ]; then
        apt-get update -qq && apt-get install -y -qq openssl >/dev/null
    else
        sudo apt-get update -qq && sudo apt-get install -y -qq openssl >/dev/null
    fi
fi

echo "== machine"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')"
echo "cores: $(nproc)   load: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"

echo
echo "== privsvc (cargo run --release --example token_bench -- --seconds $secs)"
ours="$(cargo run --quiet --release --example token_bench -- --seconds "$secs")"
echo "$ours"

echo
echo "== $(openssl version)"
ossl="$(openssl speed -seconds "$secs" rsa2048 2>/dev/null)"
echo "$ossl" | grep -E '^ *sign|^rsa 2048'
# Line: "rsa 2048 bits 0.000233s 0.000013s   4299.0  74325.4"
ossl_sign="$(echo "$ossl" | awk '/^rsa 2048 bits/ {print $(NF-1)}')"
ossl_verify="$(echo "$ossl" | awk '/^rsa 2048 bits/ {print $NF}')"

val() { echo "$ours" | sed -n "s/^$1=//p"; }
echo
echo "== summary (operations per second, one core)"
printf '%-34s %10s %10s\n' case ours openssl
printf '%-34s %10s %10s\n' "blind sign, blind-rsa-signatures" "$(val blind_sign_crate_per_s)" "$ossl_sign"
printf '%-34s %10s %10s\n' "blind sign, issuer (BlindSigner)" "$(val blind_sign_issuer_per_s)" "$ossl_sign"
printf '%-34s %10s %10s\n' "RSA-CRT private op, no blinding" "$(val blind_sign_raw_crt_per_s)" "$ossl_sign"
printf '%-34s %10s %10s\n' "verify (token / rsa verify)" "$(val verify_token_per_s)" "$ossl_verify"
awk -v a="$(val blind_sign_issuer_per_s)" -v b="$(val blind_sign_crate_per_s)" -v o="$ossl_sign" \
    'BEGIN { printf "issuer path vs crate: %.2fx   issuer path vs openssl: %.2f\n", a / b, a / o }'
