"""Load rendered LLaMA-Factory + KT recipes the way a training run does (run in the SFT env).

stdin: JSON list of {"recipe": path, "accelerate": path}; stdout: one JSON object per item with what
llamafactory-kt's get_train_args, kt-kernel's KTConfig and accelerate-kt's config loader made of them, or the
error. The one change to the recipe: `use_cpu: true`, because transformers refuses bf16 without a GPU.
"""

import json
import sys

import yaml
from accelerate.commands.config.config_args import load_config_from_file
from kt_kernel.sft import KTConfig
from llamafactory.data.template import TEMPLATES
from llamafactory.hparams import get_train_args


def load(item: dict) -> dict:
    recipe = yaml.safe_load(open(item["recipe"]))
    recipe["use_cpu"] = True
    try:
        model, data, training, finetuning, _ = get_train_args(recipe)
        kt = KTConfig.from_object(training.kt_config)
        accel = load_config_from_file(item["accelerate"]) if item.get("accelerate") else None
    except Exception as exc:  # the parsers' own refusal is the result
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "use_kt": model.use_kt,
        "model": model.model_name_or_path,
        "cutoff_len": data.cutoff_len,
        "template": data.template,
        "template_known": data.template in TEMPLATES,  # get_train_args takes any name; a run would not
        "batch": training.per_device_train_batch_size,
        "grad_accum": training.gradient_accumulation_steps,
        "bf16": training.bf16,
        "warmup_steps_of_1000": training.get_warmup_steps(1000),
        "lora_rank": finetuning.lora_rank,
        "lora_target": finetuning.lora_target,
        "kt_backend": kt.kt_backend,
        "kt_expert_weight_format": str(kt.kt_expert_weight_format),
        "kt_num_threads": kt.kt_num_threads,
        "kt_threadpool_count": kt.kt_threadpool_count,
        "kt_tp_enabled": kt.kt_tp_enabled,
        "kt_lora_rank": kt.kt_lora_rank,
        "accelerate": None
        if accel is None
        else {
            "num_processes": accel.num_processes,
            "distributed_type": str(accel.distributed_type),
            "fsdp_version": accel.fsdp_config.get("fsdp_version"),
            "mixed_precision": str(accel.mixed_precision),
            "main_process_port": accel.main_process_port,
        },
    }


print(json.dumps([load(item) for item in json.load(sys.stdin)]))
