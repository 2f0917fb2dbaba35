"""docs/readme/planner.md lists the catalog's short names as ktinfra/data/models.yaml holds them.

The page said `--model` takes "a catalog short name (`Qwen3-30B-A3B`, `DeepSeek-V3`, `DeepSeek-V2-Lite`,
`Kimi-K2`, `Qwen3-235B-A22B`, the `-Instruct-2507` refreshes; any case)", while the catalog also holds
Kimi-K2-Thinking (and `ktinfra plan --model Kimi-K2-Thinking` plans it): a reader of the list did not know it
was there. The names in that parenthesis, with "the `-Instruct-2507` refreshes" read as every catalog name
ending so, must be the catalog's names."""

import re
from pathlib import Path

from ktinfra import catalog

PAGE = Path(__file__).resolve().parents[2] / "docs" / "readme" / "planner.md"


def _listed() -> set[str]:
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    listing = text.split("`--model` takes a catalog short name (", 1)[1].split("; any case)", 1)[0]
    names = set(re.findall(r"`([A-Za-z0-9.-]+)`", listing))
    suffixes = {n for n in names if n.startswith("-")}
    refreshes = {a.name for a in catalog.list_models() if any(a.name.endswith(s) for s in suffixes)}
    return (names - suffixes) | refreshes


def test_the_page_lists_every_catalog_model_and_no_other():
    catalog_names = {a.name for a in catalog.list_models()}
    assert len(catalog_names) >= 8
    assert _listed() == catalog_names
