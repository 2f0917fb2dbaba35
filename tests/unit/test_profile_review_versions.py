"""`ktinfra profile drift` (profiles.freeze_drift) and the image's validate step (images/scripts/validate.py)
compare a pin with the installed version as PEP 440's `==` does, with packaging as the reference. Before,
both compared strings (with only a local label dropped): a site pin `x==2.0` was reported as drift against
an installed 2.0.0, and `1.0rc1` against pip's normal spelling of `1.0.0-rc.1`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from ktinfra import profiles

SCRIPT = Path(__file__).parents[2] / "images" / "scripts" / "validate.py"
_spec = importlib.util.spec_from_file_location("validate_versions", SCRIPT)
validate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(validate)

PAIRS = [  # (installed, pinned)
    ("2.0.0", "2.0"),
    ("2.0", "2.0.0"),
    ("1.0.0.0", "1"),
    ("2.0.1", "2.0"),
    ("2.9.1+cu128", "2.9.1"),
    ("2.9.1+cu126", "2.9.1+cu128"),
    ("2.9.1+CU128", "2.9.1+cu128"),
    ("2.8.3", "2.8.3+cu12torch2.7cxx11abiTRUE"),
    ("1.0.0rc1", "1.0rc1"),
    ("1.0-rc.1", "1.0rc1"),
    ("1.0rc1", "1.0"),
    ("1.0.post1", "1.0-1"),
    ("1.0.dev0", "1.0"),
    ("1!1.0", "1.0"),
    ("1.0a1", "1.0alpha1"),
    ("1.0b2", "1.0-beta.2"),
    ("0.7.2", "0.7.2"),
    ("0.7.2", "0.7.1"),
]


@pytest.mark.parametrize(("installed", "pinned"), PAIRS)
def test_both_copies_agree_with_packaging(installed, pinned):
    expected = SpecifierSet(f"=={pinned}").contains(installed, prereleases=True)
    assert profiles._same_version(installed, pinned) is expected
    assert validate.same_version(installed, pinned) is expected


def test_drift_accepts_a_pin_met_in_another_spelling():
    env = profiles.env_spec(profiles.load_profile("kt-0.7"), "sft")
    env = env | {"packages": [*env["packages"], "pyyaml==6.0"]}
    freeze = "ktransformers==0.7.2\nkt_kernel==0.7.2\ntorch==2.9.1+cu128\ntorchaudio==2.9.1\nPyYAML==6.0.0\n"
    assert profiles.freeze_drift(env, freeze) == []
    problems = profiles.freeze_drift(env, freeze.replace("PyYAML==6.0.0", "PyYAML==6.0.1"))
    assert problems == [f"{env['name']}: pyyaml is 6.0.1, the profile pins 6.0"]
