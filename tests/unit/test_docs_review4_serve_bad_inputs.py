"""docs/readme/roles2.md lists every bad input the molecule serve scenario checks.

The list named 7 of the 9 bad serve lists of molecule/serve/tests/test_bad_inputs.py's CASES (no unknown
`overrides` key, no `plan_args` option `ktinfra plan` lacks) and not the bad `kt_serve_overrides` value of
test_bad_kt_serve_overrides_fail_before_changes. Each case (a CASES key or a test_bad_* function) has the
words the page uses for it below; a new case without an entry here fails, as does a page that drops one."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "readme" / "roles2.md"
TESTS = ROOT / "molecule" / "serve" / "tests" / "test_bad_inputs.py"
WORDS = {
    "malformed port": "malformed/missing port",
    "missing port": "malformed/missing port",
    "unknown key": "unknown key",
    "duplicate port": "duplicate port",
    "model path missing": "missing model path",
    "model not in store": "model not in store",
    "unknown override key": "unknown `overrides` key",
    "plan option that does not exist": "a `plan_args` option `ktinfra plan` does not have",
    "public without key": "0.0.0.0 without key",
    "test_bad_kt_serve_overrides_fail_before_changes": "a `kt_serve_overrides` value out of range",
}


def _cases() -> list[str]:
    tree = ast.parse(TESTS.read_text(encoding="utf-8"))
    cases = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "CASES" for t in node.targets):
            cases += [key.value for key in node.value.keys]
        if (
            isinstance(node, ast.FunctionDef)
            and node.name.startswith("test_bad_")
            and "CASES" not in ast.unparse(node)
        ):
            cases.append(node.name)
    return cases


def _bad_inputs_sentence() -> str:
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    return text.split("Bad inputs (", 1)[1].split(") fail with", 1)[0]


def test_every_case_has_its_words():
    cases = _cases()
    assert len(cases) >= 10, cases
    assert [c for c in cases if c not in WORDS] == []


def test_the_page_names_every_case():
    sentence = _bad_inputs_sentence()
    assert sorted({words for case, words in WORDS.items() if words not in sentence}) == []
