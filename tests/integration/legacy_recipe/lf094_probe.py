"""Load rendered recipes with LLaMA-Factory 0.9.4's get_train_args (run in the legacy-parser venv).

stdin: JSON list of recipe paths; stdout (last line): one JSON object per recipe with what 0.9.4 made of it,
or its error. Two changes from a real legacy run: `use_cpu: true` (transformers refuses bf16 without a GPU)
and the one presence check for the `ktransformers` package, which only exists as the 0.4.2 wheel on GitHub;
every argument check of get_train_args runs for real.
"""

import json
import sys

import yaml
from llamafactory.hparams import parser

checked = []
real_check_version = parser.check_version


def check_version(requirement: str, mandatory: bool = False) -> None:
    if requirement == "ktransformers":
        checked.append(requirement)
        return
    real_check_version(requirement, mandatory)


parser.check_version = check_version


def load(path: str) -> dict:
    recipe = yaml.safe_load(open(path))
    recipe["use_cpu"] = True
    checked.clear()
    try:
        model, data, training, finetuning, _ = parser.get_train_args(recipe)
    except Exception as exc:  # the parser's own refusal is the result
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "use_kt": model.use_kt,
        "kt_optimize_rule": model.kt_optimize_rule,
        "cpu_infer": model.cpu_infer,
        "chunk_size": model.chunk_size,
        "cutoff_len": data.cutoff_len,
        "template": data.template,
        "batch": training.per_device_train_batch_size,
        "grad_accum": training.gradient_accumulation_steps,
        "warmup_steps_of_1000": training.get_warmup_steps(1000),
        "lora_rank": finetuning.lora_rank,
        "ktransformers_required": checked == ["ktransformers"],
    }


print(json.dumps([load(path) for path in json.load(sys.stdin)]))
