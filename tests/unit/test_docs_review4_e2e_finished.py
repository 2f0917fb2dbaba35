"""docs/readme/e2e.md's LoRA hand-off says what makes a run finished, as kt_train decides it.

The diagram said a run is finished when outputs/RUN holds the adapter files and the unit is not active, while
roles/kt_train/tasks/finished.yml also requires LLaMA-Factory's train_results.json no older than those files
(newer than the recipe for a run the role starts) and reads the unit's end record .ktinfra-run-end: an output
copied in without train_results.json is never converted nor handed to its serve instance. Each file the rule
looks at must be named on the page."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "readme" / "e2e.md"
RULE = ROOT / "roles" / "kt_train" / "tasks" / "finished.yml"


def _files_the_rule_reads() -> set[str]:
    looked_for = RULE.read_text(encoding="utf-8").split("paths:", 1)[1].split("register:", 1)[0]
    return {
        name.replace("{{ kt_train__run.name }}", "RUN") for name in re.findall(r"/([^/\"]+)\"", looked_for)
    }


def test_the_rule_reads_the_files_this_test_knows():
    assert _files_the_rule_reads() == {
        "fused_expert_lora.safetensors",
        "adapter_model.safetensors",
        "train_results.json",
        "RUN.yaml",
        ".ktinfra-run-end",
    }


def test_the_page_names_every_file_the_rule_reads():
    page = PAGE.read_text(encoding="utf-8")
    assert sorted(f for f in _files_the_rule_reads() if f not in page) == []
