#!/usr/bin/env python3
"""Record (or check) the chat template names of one stack's LLaMA-Factory in
ktinfra/data/llamafactory-templates.yaml, read from its data/template.py inside a wheel or as a file.

    # current stack: the llamafactory-kt wheel ktransformers[sft]==0.7.2 installs (PyPI)
    pip download --no-deps -d /tmp/w llamafactory-kt==0.9.6.dev0
    python scripts/llamafactory_templates.py current /tmp/w/llamafactory_kt-0.9.6.dev0-py3-none-any.whl \\
        --source "llamafactory-kt 0.9.6.dev0"
    # legacy stack: the commit the kt-0.4-autodl profile checks out (GitHub)
    git -C LLaMA-Factory show 000526908ae9:src/llamafactory/data/template.py > /tmp/template.py
    python scripts/llamafactory_templates.py legacy /tmp/template.py \\
        --source "LLaMA-Factory 000526908ae9 (0.9.4.dev0)"

--check exits 1 when the recorded names differ from the file's, writing nothing.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ktinfra.render.chat_templates import RECORDED, TEMPLATE_PY, recorded, registered  # noqa: E402

HEADER = (
    "# LLaMA-Factory chat template names per stack generation, for `ktinfra render train --template`.\n"
    "# Written by scripts/llamafactory_templates.py; ktinfra reads the stack's own data/template.py instead\n"
    "# where it is on the rendering machine.\n"
)


class IndentedLists(yaml.SafeDumper):
    """Block lists indented under their key, as yamllint (ansible-lint) wants them."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def template_source(path: Path) -> str:
    if path.suffix != ".whl":
        return path.read_text(encoding="utf-8")
    with zipfile.ZipFile(path) as wheel:
        return wheel.read(str(TEMPLATE_PY)).decode("utf-8")


def main(argv: list[str] | None = None) -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("generation", choices=("current", "legacy"))
    parser.add_argument("file", type=Path, help="a wheel holding llamafactory/data/template.py, or that file")
    parser.add_argument("--source", help="what the names were read from, as the refusals name it")
    parser.add_argument("--check", action="store_true", help="compare with the record, write nothing")
    args = parser.parse_args(argv)
    names = registered(template_source(args.file))
    data = dict(recorded()) if RECORDED.exists() else {}
    if args.check:
        kept = data[args.generation]["names"]
        missing, extra = sorted(set(names) - set(kept)), sorted(set(kept) - set(names))
        if missing or extra:
            print(f"{args.generation}: not recorded {missing}; recorded, not in the file {extra}")
            return 1
        print(f"{args.generation}: {len(names)} names as recorded")
        return 0
    source = args.source or data.get(args.generation, {}).get("source")
    if not source:
        parser.error("--source is needed for a generation not recorded yet")
    data[args.generation] = {"source": source, "names": names}
    tmp = RECORDED.with_suffix(".tmp")
    tmp.write_text(HEADER + yaml.dump(data, Dumper=IndentedLists, sort_keys=True))
    tmp.replace(RECORDED)
    print(f"{args.generation}: {len(names)} names recorded from {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
