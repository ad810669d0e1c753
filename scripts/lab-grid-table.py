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


def bytes_cell(c):
    """All sessions' bytes a minute, then idle and writing sessions' apart when measured."""
    cell = f"{c['relay_bytes_per_session_minute'] / 1024:.0f} KiB"
    if "relay_bytes_per_idle_session_minute" in c:
        idle = c["relay_bytes_per_idle_session_minute"] / 1024
        writing = c["relay_bytes_per_writing_session_minute"] / 1024
        cell += f" ({idle:.0f} / {writing:.0f})"
    return cell


def gas_cell(c):
    """Gas per 1,000 records written, in millions (reports before it was measured: -)."""
    gas = c.get("gas_per_1000_writes")
    return "-" if gas is None else f"{gas / 1e6:.1f} M"


def main():
    head = ["setting"] + [f"`{a}`" for a in ATTACKS] + [
        "write median / p95 (ms)",
        "relay bytes a session-minute (idle / writing)",
        "relay req/s per 1,000 sessions",
        "ledger records a write",
        "gas per 1,000 records",
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
            bytes_cell(c),
            f"{c['relay_requests_per_s_per_1000_sessions']:.0f}",
            f"{c['ledger_records_per_write']:.2f}",
            gas_cell(c),
        ]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
