"""Findings as people read them (`amqpcap decode --findings` and `--stats`, `amqpcap findings`, the
report's "What needs attention"): errors first, then warnings, then notes; the same finding on many
connections (a deprecated declare by every web request) one line with how many."""

from __future__ import annotations

from amqpcap.rules.findings.finding import SEVERITIES


def grouped(rows: list[dict]) -> list[dict]:
    """Findings of the same kind, severity and summary as one entry: the first of them, with
    `connections` (how many) and `ids` (their finding ids); by severity, then time."""
    groups: dict[tuple, dict] = {}
    for row in rows:
        key = (row.get("kind"), row.get("severity"), row.get("summary"))
        group = groups.get(key)
        if group is None:
            group = groups[key] = {**row, "connections": 0, "ids": []}
        group["connections"] += row.get("connections", 1)  # (rows grouped before count as many)
        group["ids"] += row.get("ids", [row.get("finding_id")])
        if (row.get("first_ns") or 0) < (group.get("first_ns") or 0):
            group["first_ns"] = row.get("first_ns")
    rank = {severity: i for i, severity in enumerate(SEVERITIES)}
    return sorted(groups.values(), key=lambda g: (rank.get(g.get("severity"), len(rank)), g.get("first_ns") or 0,
                                                  g.get("kind") or ""))


def shown(rows: list[dict]) -> list[dict]:
    """The grouped findings as `decode --findings --json` and `--stats --json` give them: without the
    columns that only say where the lake keeps them."""
    return [{k: v for k, v in group.items() if k not in ("source", "provisional", "run_id", "date")}
            for group in grouped(rows)]


def counts(rows: list[dict]) -> dict[str, int]:
    """Findings per severity, in reading order."""
    out = {severity: 0 for severity in SEVERITIES}
    for row in rows:
        out[row.get("severity")] = out.get(row.get("severity"), 0) + 1
    return out


def render_text(rows: list[dict]) -> str:
    """One line per (grouped) finding: severity, kind, summary, where."""
    if not rows:
        return "findings: none\n"
    groups = grouped(rows)
    tally = ", ".join(f"{n} {severity}" for severity, n in counts(groups).items() if n)
    lines = [f"findings: {tally}" + (f" ({len(rows)} with those on several connections)" if len(rows) > len(groups)
                                     else "")]
    for group in groups:
        where = group.get("client") if group.get("connection") is None else \
            f"connection {group['connection'][:8]} {group.get('client')} -> {group.get('server')}"
        times = f" (on {group['connections']} connections)" if group["connections"] > 1 else ""
        lines.append(f"  {group['severity']:<7} {group['kind']}: {group['summary']}{times}")
        lines.append(f"          {where}; {group.get('capture') or ''}; evidence: {group.get('evidence_json') or '{}'}")
    return "\n".join(lines) + "\n"
