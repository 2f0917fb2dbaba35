"""Parameters of a multimodal checkpoint as the installed transformers builds it (run in an env that has it).

The whole model is built from its config.json on the meta device (no memory, no weights) with the class
its `architectures` names; parameters under a `visual` module are the vision tower, the rest the language
model (transformers leaves out the MTP layers the checkpoint ships).

stdin: {name: config.json}; stdout: {name: {"vision": int, "language": int, "class": str}}.
"""

import json
import sys

import torch
import transformers


def count(config: dict) -> dict:
    built = transformers.AutoConfig.for_model(**config)
    cls = getattr(transformers, config["architectures"][0])
    with torch.device("meta"):
        model = cls._from_config(built)
    vision = language = 0
    for name, parameter in model.named_parameters():
        if "visual." in name:
            vision += parameter.numel()
        else:
            language += parameter.numel()
    return {"vision": vision, "language": language, "class": cls.__name__}


print(json.dumps({name: count(config) for name, config in json.load(sys.stdin).items()}))
