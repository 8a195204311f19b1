"""What a report is made of, before it becomes HTML: sections of plots, small tables and notes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NOTHING = "Nothing in this period."


@dataclass(frozen=True)
class Link:
    """A table cell that links to another part of the page (a section's anchor)."""
    text: str
    href: str


@dataclass
class Table:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    caption: str = ""


@dataclass
class Section:
    key: str                      # the HTML anchor
    title: str
    how_to_read: str              # one line: how to read the plot
    figures: list = field(default_factory=list)   # plotly Figures; a tuple of them: one row, side by side
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.figures and not self.tables


@dataclass
class Header:
    lake: str
    period: str
    traffic: str                   # the span of the traffic found in the period
    generated: str
    totals: list[tuple[str, Any]]  # (what, how many)
    captures: Table
    runs: Table
    notes: list[str] = field(default_factory=list)
