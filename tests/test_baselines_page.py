"""docs/baselines.md lists every scheduler hetsched ships (issue 27 item 6): its table's
names are exactly the names the command line and ``hs.simulate`` accept, and every page it
links exists."""

from __future__ import annotations

import re
from pathlib import Path

from hetsched.schedulers.names import list_schedulers

PAGE = Path(__file__).resolve().parents[1] / "docs" / "baselines.md"


def _table() -> list[str]:
    text = PAGE.read_text()
    part = text[text.index("## Every scheduler"):text.index("## Details of the older baselines")]
    return [ln for ln in part.splitlines() if ln.startswith("| `")]


def test_every_scheduler_is_listed_once():
    names = [n for row in _table() for n in re.findall(r"`([a-z_0-9]+)`", row.split("|")[1])]
    assert sorted(names) == list_schedulers()


def test_linked_pages_and_anchors_exist():
    text = PAGE.read_text()
    anchors = {re.sub(r"[^a-z0-9 _-]", "", h.strip("# ").lower()).replace(" ", "-")
               for h in re.findall(r"^##+ .*$", text, flags=re.M)}
    for row in _table():
        for target in re.findall(r"\]\(([^)]+)\)", row):
            if target.startswith("#"):
                assert target[1:] in anchors, target
            else:
                assert (PAGE.parent / target).exists(), target
