"""The parts of the docs that the code holds, written between ``<!-- NAME:start -->`` and
``<!-- NAME:end -->``: the datasets table, the settings table and the ``daybreak status`` synopsis.

    python -m tasks.docs            rewrite every generated block that is out of date
    python -m tasks.docs --check    change nothing; exit 1 naming each block that is out of date
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tasks import catalogue

REPO = Path(__file__).resolve().parent.parent
COMMAND = "python -m tasks.docs"


@dataclass(frozen=True)
class Block:
    name: str
    file: str  # below the repository root
    make: Callable[[], str]


def settings_table() -> str:
    """Every setting: section, key, default, valid values, what it does."""
    import luigi

    from tasks import settings
    from tasks.guard import DATES
    from tasks.luigi_shortcuts import default_of

    rows = ["| section | key | default | valid values | what it does |", "|---|---|---|---|---|"]
    for name, section in settings.SECTIONS.items():
        for key, param in section.get_params():
            default = default_of(param)
            low, high = settings.RANGES.get((name, key), (None, None))
            if isinstance(param, luigi.IntParameter):
                high = settings.INT_MAX if high is None else min(high, settings.INT_MAX)
                valid = f"a whole number, {_bounds(low, high)}"
            elif isinstance(param, luigi.FloatParameter):
                valid = f"a number, {_bounds(low, high)}" if low is not None or high is not None else "a number"
            elif isinstance(param, luigi.DateParameter):
                last = "today" if (name, key) == ("daybreak", "start_date") else str(DATES[1])
                valid = f"a date, {DATES[0]} to {last}"
            else:
                valid = settings.FORMS.get((name, key), "text")
            shown = "(none)" if default == "" else f"`{default:g}`" if isinstance(default, float) else f"`{default}`"
            rows.append(f"| {name} | {key} | {shown} | {valid} | {_cell(param.description or '')} |")
    return "\n".join(rows)


def _bounds(low, high) -> str:
    low, high = (f"{x:g}" if isinstance(x, float) else x for x in (low, high))
    if high is None:
        return f"{low} or more"
    return f"{low} to {high}" if low is not None else f"at most {high}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def dataset_names() -> str:
    """The README's line on ``daybreak status``: the datasets its ``--dataset`` takes (every dataset)."""
    names = "|".join(catalogue.names())
    synopsis = f"daybreak status [--dataset {names}] [--start D] [--stop D] [--json]"
    return f"- Status of every dataset, or of one: `{synopsis}`"


BLOCKS = (
    Block("datasets", "docs/datasets.md", catalogue.markdown_table),
    Block("settings", "docs/operations.md", settings_table),
    Block("dataset-names", "README.md", dataset_names),
)


def _span(text: str, name: str) -> re.Match | None:
    return re.search(rf"(<!-- {re.escape(name)}:start -->\n)(.*?)(<!-- {re.escape(name)}:end -->)", text, re.S)


def current(block: Block, root: Path = REPO) -> str | None:
    """What the file holds between the block's markers (None: no markers)."""
    found = _span((root / block.file).read_text(encoding="utf-8"), block.name)
    return found.group(2).removesuffix("\n") if found else None


def out_of_date(root: Path = REPO) -> list[str]:
    """One line per block that differs from what the code makes (or has no markers)."""
    out = []
    for block in BLOCKS:
        held = current(block, root)
        if held is None:
            out.append(f"{block.file}: no <!-- {block.name}:start --> ... <!-- {block.name}:end --> markers")
        elif held != block.make():
            out.append(f"{block.file}: the {block.name} block is out of date; run `{COMMAND}`")
    return out


def update(root: Path = REPO) -> list[str]:
    """Rewrite each block that is out of date; return the files written."""
    written = []
    for block in BLOCKS:
        path = root / block.file
        text = path.read_text(encoding="utf-8")
        found = _span(text, block.name)
        if found is None:
            raise SystemExit(f"{block.file}: no <!-- {block.name}:start --> ... <!-- {block.name}:end --> markers")
        new = text[: found.start(2)] + block.make() + "\n" + text[found.end(2) :]
        if new != text:
            path.write_text(new, encoding="utf-8")
            written.append(block.file)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description="Write the docs' generated blocks from the code.")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block is out of date")
    args = parser.parse_args(argv)
    if args.check:
        stale = out_of_date()
        for line in stale:
            print(line, file=sys.stderr)
        return 1 if stale else 0
    for file in update():
        print(f"wrote {file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
