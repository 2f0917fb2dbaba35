"""The counts docs/readme/render.md and roles1.md quote for their tests are the counts those tests have now.

The page said the render tests plan "every host capture (6 feasible serve plans, 3 SFT plans per stack)" and
that SGLang-KT's parser takes "the serve arguments of 6 plans" and llamafactory-kt "3 current recipes", while
the planner now finds 10 feasible serve plans and 8 SFT plans per stack over tests/fixtures/hosts, and the
molecule envs test holds 8 serve and 4 train cases; docs/readme/roles1.md gave molecule bad-input "5 bad
inputs" where its converge runs 7 (an argument the spec refuses and the legacy profile without conda were
added). Each number is read from the page and computed from what it describes: the planner over the captures
test_render_planned.py renders, the case tables of molecule/envs/tests/test_rendered_for_real_parsers.py (read
with ast: importing it needs testinfra), the cases of molecule/bad-input/converge.yml."""

import ast
import re
from pathlib import Path

import yaml
from test_render_planned import CAPTURES, HOSTS, MODEL, SFT_CASES

from ktinfra import planner
from ktinfra.facts import from_capture

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "readme" / "render.md"
ROLES1_PAGE = ROOT / "docs" / "readme" / "roles1.md"
BAD_INPUT_CONVERGE = ROOT / "molecule" / "bad-input" / "converge.yml"
PARSER_TEST = ROOT / "molecule" / "envs" / "tests" / "test_rendered_for_real_parsers.py"
STACKS = ("kt-0.7", "kt-0.4-autodl")


def _page(page: Path = PAGE) -> str:
    return " ".join(page.read_text(encoding="utf-8").split())


def _quoted(pattern: str, page: Path = PAGE) -> tuple[int, ...]:
    found = re.findall(pattern, _page(page))
    assert len(found) == 1, f"{page.name}: {pattern!r} found {len(found)} times"
    return tuple(int(n) for n in (found[0] if isinstance(found[0], tuple) else (found[0],)))


def _case_table(name: str) -> dict:
    tree = ast.parse(PARSER_TEST.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{PARSER_TEST.name} has no {name}")


def test_the_render_tests_plan_as_many_feasible_plans_as_the_page_says():
    serve_quoted, sft_quoted = _quoted(r"\((\d+) feasible serve plans, (\d+) SFT plans per stack\)")
    serve = sum(planner.plan(from_capture(HOSTS / c), MODEL, "serve")["feasible"] for c in CAPTURES)
    sft = {
        stack: sum(
            planner.plan(from_capture(HOSTS / c), model, "sft", stack=stack)["feasible"]
            for c, model, _ in SFT_CASES
        )
        for stack in STACKS
    }
    assert (serve_quoted, sft_quoted) == (serve, sft["kt-0.7"]) and sft["kt-0.7"] == sft["kt-0.4-autodl"], sft


def test_the_real_parser_cases_are_as_many_as_the_page_says():
    (serve_quoted,) = _quoted(r"takes the serve arguments of (\d+) plans \(")
    (train_quoted,) = _quoted(r"loads (\d+) current recipes \(")
    assert (serve_quoted, train_quoted) == (len(_case_table("SERVE_CASES")), len(_case_table("TRAIN_CASES")))


def test_the_bad_input_scenario_runs_as_many_cases_as_the_page_says():
    (quoted,) = _quoted(r"\| `bad-input` \(in `make test-full`\) \| (\d+) bad inputs against", ROLES1_PAGE)
    play = yaml.safe_load(BAD_INPUT_CONVERGE.read_text(encoding="utf-8"))[0]
    assert quoted == len(play["vars"]["kt_test_cases"])
