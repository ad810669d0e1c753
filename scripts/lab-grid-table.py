#!/usr/bin/env python3
"""The network watcher's grid as a table (docs/PRIVACY.md, "What a network watcher sees").

Each argument is `label=report.json`, a report written by
`cargo run --release --features lab --example attack_lab -- --json report.json ...`.
Prints one Markdown row per report: the watcher's attacks against chance, then the costs.
"""
import json
import sys

ATTACKS = [
    "onlooker-relayer-timing",
    "issuer-onlooker-wallet",
    "polls-stop-relay",
    "polls-stop-onlooker",
    "size-class-relay",
    "size-class-onlooker",
    "n-minus-one-flood",
]


def cell(attacks, name):
    a = attacks.get(name)
    if not a or a["measured"]["trials"] == 0:
        return "-"
    m = a["measured"]
    mark = "**" if m["low"] > m["chance"] else ""
    return f"{mark}{m['rate']:.2f}{mark} / {m['chance']:.2f} ({m['trials']})"


def main():
    head = ["setting"] + [f"`{a}`" for a in ATTACKS] + [
        "write median / p95 (ms)",
        "relay bytes a session-minute",
        "relay req/s per 1,000 sessions",
        "ledger records a write",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "-|" * len(head))
    for arg in sys.argv[1:]:
        label, path = arg.split("=", 1)
        with open(path) as f:
            report = json.load(f)
        attacks = {a["id"]: a for a in report["attacks"]}
        c = report["costs"]
        row = [label] + [cell(attacks, a) for a in ATTACKS] + [
            f"{c['write_median_ms']:.0f} / {c['write_p95_ms']:.0f}",
            f"{c['relay_bytes_per_session_minute'] / 1024:.0f} KiB",
            f"{c['relay_requests_per_s_per_1000_sessions']:.0f}",
            f"{c['ledger_records_per_write']:.2f}",
        ]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
