"""What ktinfra renders is what the real kt-0.7 envs accept.

Units and recipes are rendered here (the controller) from the facts fixtures, the way `ktinfra render` does it
on a host; the container's real envs then read them: SGLang-KT's own argument parser takes each serve unit's
arguments (and kt-kernel knows its method), llamafactory-kt's get_train_args takes each training recipe,
kt-kernel's KTConfig takes its kt_config and accelerate-kt loads the FSDP2 config the unit launches with.
"""

import base64
import importlib.util
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FACTS = REPO / "tests" / "fixtures" / "facts"
PROBES = Path(__file__).resolve().parents[1] / "probes"
INFER = "/opt/kt/envs/kt-kernel/bin/python"
SFT = "/opt/kt/envs/kt-sft/bin/python"
WORK = "/tmp/ktinfra-rendered"

SERVE_CASES = {
    # name: (model, facts source, extra plan options)
    "seed002-amxint8": ("Qwen3-30B-A3B", "seed002-autodl-6430-4090", []),
    "h100-bf16": ("Qwen3-30B-A3B", "h100-amx", []),
    "8352v-llamafile": ("Qwen3-30B-A3B", "xeon8352v-4090-noamx", []),
    "4xl40s-tp4": ("Qwen3-235B-A22B", "dual-spr-2xnuma-4xl40s", []),
    "seed002-lora": ("Qwen3-30B-A3B", "seed002-autodl-6430-4090", ["--lora", "style=/data/lora/style"]),
    "socket1-numa-nodes": ("Qwen3-30B-A3B", "capture:socket1", []),
    "4xl40s-qwen3-next": ("config:QWEN3_NEXT_80B_A3B", "dual-spr-2xnuma-4xl40s", []),  # hybrid, TP 4
    "4xl40s-kimi-k2-thinking": ("Kimi-K2-Thinking", "dual-spr-2xnuma-4xl40s", []),  # int4: RAWINT4
}
TRAIN_CASES = {
    "seed002": ("Qwen3-30B-A3B", "seed002-autodl-6430-4090"),
    "h100": ("DeepSeek-V2-Lite", "h100-amx"),
    "4xl40s": ("Qwen3-30B-A3B", "dual-spr-2xnuma-4xl40s"),
    "seed002-qwen3.5": ("config:QWEN3_5_35B_A3B", "seed002-autodl-6430-4090"),  # template by wrapper type
}


def ktinfra(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "ktinfra", *args, "--json"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def plan_and_render(tmp: Path, name: str, plan_args: list[str], render_args: list[str]) -> tuple[dict, dict]:
    """`ktinfra plan`, its JSON saved as a file, then `ktinfra render KIND --plan FILE` into tmp/name."""
    plan = ktinfra("plan", *plan_args)
    plan_file = tmp / f"{name}.plan.json"
    plan_file.write_text(json.dumps(plan))
    kind, *rest = render_args
    rendered = ktinfra(
        "render", kind, "--plan", str(plan_file), "--name", name, *rest, "--out", str(tmp / name)
    )
    return plan, rendered


def real_config(name: str) -> dict:
    """A published config.json from tests/unit/model_configs.py (another pytest root, so loaded by path)."""
    path = REPO / "tests" / "unit" / "model_configs.py"
    spec = importlib.util.spec_from_file_location("model_configs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def model_option(model: str, tmp: Path) -> str:
    if model.startswith("config:"):
        directory = tmp / model.partition(":")[2]
        directory.mkdir(exist_ok=True)
        (directory / "config.json").write_text(json.dumps(real_config(model.partition(":")[2])))
        return str(directory)
    return model


def facts_option(source: str, tmp: Path) -> list[str]:
    if source == "capture:socket1":
        # a container pinned to the second socket of a 2-socket AMX host (synthetic capture + a cpuset)
        capture = tmp / "socket1"
        shutil.copytree(REPO / "tests" / "fixtures" / "hosts" / "synthetic-2s-8470q-amx", capture)
        (capture / "cgroup.txt").write_text("/sys/fs/cgroup/cpuset.cpus.effective: 52-103\n")
        return ["--from", str(capture)]
    return ["--facts", str(FACTS / f"{source}.json")]


def put(host, path: str, data: bytes) -> None:
    encoded = base64.b64encode(data).decode()
    host.run_test("mkdir -p %s && echo %s | base64 -d > %s", str(Path(path).parent), encoded, path)


def probe(host, python: str, script: str, payload) -> list:
    put(host, f"{WORK}/{script}", (PROBES / script).read_bytes())
    put(host, f"{WORK}/{script}.in.json", json.dumps(payload).encode())
    out = host.run(f"{python} {WORK}/{script} < {WORK}/{script}.in.json")
    assert out.rc == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def serve_results(host, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    cases = {}
    for name, (model, source, extra) in SERVE_CASES.items():
        model_args = ["--model", model_option(model, tmp), "--mode", "serve"]
        plan, rendered = plan_and_render(
            tmp, name, [*model_args, *facts_option(source, tmp), *extra],
            ["serve", "--model-path", "/data/models/m", "--weight-path", "/data/cpu-weights/m"],
        )  # fmt: skip
        env = (tmp / name / f"ktinfra-serve-{name}.env").read_text()
        line = next(x for x in env.splitlines() if x.startswith("KT_SERVE_ARGS="))
        # systemd splits an unquoted $VAR in ExecStart on whitespace: that is what sglang receives
        argv = shlex.split(line.partition("=")[2])[0].split()
        assert argv == rendered["argv"][3:], name
        cases[name] = (plan, argv)
    # the unit's launch shim puts `--api-key=KEY` first when the env file holds one; a generated key may
    # start with '-' (token_urlsafe: 1 in 64), which argparse takes only in the one-word form
    argvs = [argv for _, argv in cases.values()] + [["--api-key=-k3y", *cases["h100-bf16"][1]]]
    parsed = probe(host, INFER, "sglang_args.py", argvs)
    return cases, dict(zip([*cases, "h100-api-key"], parsed, strict=True))


@pytest.mark.parametrize("name", SERVE_CASES)
def test_sglang_kt_parses_the_rendered_serve_arguments_as_planned(serve_results, name):
    cases, parsed = serve_results
    plan, _ = cases[name]
    serve, got = plan["serve"], parsed[name]
    assert "error" not in got, got
    assert got["kt_method_known"], got["kt_method"]
    expected = {
        "host": serve["host"],
        "port": serve["port"],
        "model_path": "/data/models/m",
        "mem_fraction_static": serve["mem_fraction_static"],
        "chunked_prefill_size": serve["chunked_prefill_size"],
        "max_running_requests": serve["max_running_requests"],
        "max_total_tokens": serve["max_total_tokens"],
        "max_mamba_cache_size": serve["max_mamba_cache_size"],
        "cuda_graph_max_bs": serve["cuda_graph_max_bs"],
        "tensor_parallel_size": serve["tensor_parallel_size"],
        "served_model_name": name,
        "kt_method": serve["kt_method"],
        "kt_cpuinfer": serve["kt_cpuinfer"],
        "kt_threadpool_count": serve["kt_threadpool_count"],
        "kt_num_gpu_experts": serve["kt_num_gpu_experts"],
        "kt_max_deferred_experts_per_token": serve["kt_max_deferred_experts_per_token"],
        "kt_gpu_prefill_token_threshold": serve["kt_gpu_prefill_token_threshold"],
        "trust_remote_code": True,
        "api_key": None,
    }
    assert {key: got[key] for key in expected} == expected
    assert got["kt_numa_nodes"] == serve["kt_numa_nodes"]
    if serve["kt_method"] in ("BF16", "FP8", "RAWINT4"):
        assert got["kt_weight_path"] == "/data/cpu-weights/m"


def test_the_cases_cover_what_the_planner_varies(serve_results):
    cases, parsed = serve_results
    methods = {plan["serve"]["kt_method"] for plan, _ in cases.values()}
    assert methods >= {"AMXINT8", "BF16", "LLAMAFILE", "RAWINT4"}
    assert parsed["4xl40s-tp4"]["tensor_parallel_size"] == 4
    assert parsed["socket1-numa-nodes"]["kt_numa_nodes"] == [1]
    assert parsed["seed002-amxint8"]["kt_threadpool_count"] == 2
    hybrid = parsed["4xl40s-qwen3-next"]
    assert hybrid["max_mamba_cache_size"] == 3 * hybrid["max_running_requests"]
    mla = parsed["4xl40s-kimi-k2-thinking"]  # an MLA pool is capped; SGLang sizes the others itself
    assert mla["max_total_tokens"] >= 4096 * mla["max_running_requests"]
    assert parsed["4xl40s-tp4"]["max_total_tokens"] is None


def test_sglang_kt_sizes_a_state_slot_as_the_plan_does(host, serve_results):
    """The planner's linear-attention slot, against SGLang-KT's own Qwen3NextConfig.mamba2_cache_params
    at TP 1, 2 and 4."""
    cases, _ = serve_results
    plan, _ = cases["4xl40s-qwen3-next"]
    got = probe(host, INFER, "mamba_state.py", {"config": real_config("QWEN3_NEXT_80B_A3B"), "tp": [1, 2, 4]})
    planned_slot = plan["requirements_breakdown"]["recurrent_state_min"] / got["slots_per_running_request"]
    assert got["slots_per_running_request"] == 3
    assert got["slots"]["1"] == {"bytes": planned_slot, "layers": 36}
    # sharded over the TP ranks (the plan's TP is 4): the same bytes in all
    assert got["slots"]["2"]["bytes"] == got["slots"]["4"]["bytes"] == planned_slot
    assert plan["serve"]["tensor_parallel_size"] == 4


def deepseek_v3_config() -> dict:
    """DeepSeek-V3's config.json: V3.2's without the indexer (V3.2 keeps every other value of V3)."""
    config = {k: v for k, v in real_config("DEEPSEEK_V32").items() if not k.startswith("index_")}
    return {**config, "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}


@pytest.mark.parametrize("name", ["DeepSeek-V3", "DeepSeek-V3.2"])
def test_sglang_kt_profiles_an_mla_token_as_the_plan_expects(host, tmp_path, name):
    """sglang-kt's own get_cell_size_per_token and MLATokenToKVPool dims (run from its installed sources):
    the profile counts fewer bytes than the pool stores, which is why MLA plans set --max-total-tokens."""
    from ktinfra import catalog, sizing

    config = deepseek_v3_config() if name == "DeepSeek-V3" else real_config("DEEPSEEK_V32")
    got = probe(host, INFER, "mla_kv.py", {"config": config})
    (tmp_path / "config.json").write_text(json.dumps(config))
    arch = catalog.resolve(str(tmp_path))
    assert got["profiled_cell_bytes"] == sizing.mla_profiled_bytes_per_token(arch)
    stored = got["pool_latent_bytes_per_token"] + sizing.index_key_bytes_per_token(arch)
    assert stored == sizing.kv_bytes_per_token(arch)
    assert (got["pool_kv_cache_dim"], got["layers"]) == (512 + 64, 61)
    assert stored / got["profiled_cell_bytes"] >= 2.4  # 3.0 on V3, 2.5 on V3.2


def test_the_vision_tower_is_sized_as_transformers_builds_it(host):
    """The planner's Qwen3.5 / Qwen3-VL vision encoder against the models the inference env's transformers
    builds from the same config.json (on the meta device): the tower exactly, the language model to within
    the norms the count leaves out."""
    from ktinfra import catalog

    names = ("QWEN3_5_35B_A3B", "QWEN3_VL_30B_A3B")
    got = probe(host, INFER, "vision_tower.py", {name: real_config(name) for name in names})
    for name in names:
        arch = catalog.from_config(real_config(name), name=name)
        assert got[name]["vision"] == arch.encoder_params > 0, name
        assert arch.total_params == pytest.approx(got[name]["language"], rel=1e-4), name
    assert got["QWEN3_VL_30B_A3B"]["vision"] > got["QWEN3_5_35B_A3B"]["vision"]  # its deepstack mergers


def test_sglang_kt_takes_the_lora_adapters_and_the_api_key(serve_results):
    _, parsed = serve_results
    lora = parsed["seed002-lora"]
    assert lora["enable_lora"] is True
    assert "style=/data/lora/style" in str(lora["lora_paths"])
    assert lora["kt_num_gpu_experts"] == 0  # kt-kernel serves LoRA only with every expert on the CPU
    assert parsed["h100-api-key"]["api_key"] == "-k3y"


def test_sglang_kt_parser_refuses_what_it_does_not_know(host):
    """The probe can fail: an unknown flag and a non-integer thread count are refused."""
    got = probe(
        host,
        INFER,
        "sglang_args.py",
        [["--model", "/m", "--kt-bogus", "1"], ["--model", "/m", "--kt-cpuinfer", "eight"]],
    )
    assert "unrecognized arguments: --kt-bogus" in got[0]["error"]
    assert "--kt-cpuinfer" in got[1]["error"]


@pytest.fixture(scope="module")
def train_results(host, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("train")
    cases, items = {}, []
    for name, (model, source) in TRAIN_CASES.items():
        plan, rendered = plan_and_render(
            tmp, name, ["--model", model_option(model, tmp), "--mode", "sft", *facts_option(source, tmp)],
            ["train", "--model-path", f"/data/models/{name}", "--dataset", "identity",
             "--dataset-dir", "/data/llamafactory", "--output-dir", f"/data/out/{name}"],
        )  # fmt: skip
        cases[name] = (plan, rendered, tmp / name)
        for suffix in ("yaml", "accelerate.yaml"):
            put(host, f"{WORK}/{name}.{suffix}", (tmp / name / f"{name}.{suffix}").read_bytes())
        items.append({"recipe": f"{WORK}/{name}.yaml", "accelerate": f"{WORK}/{name}.accelerate.yaml"})
    # the probe can fail: a key kt-kernel does not know, inside an otherwise valid recipe
    broken = (
        (cases["seed002"][2] / "seed002.yaml")
        .read_text()
        .replace("kt_config:\n", "kt_config:\n  kt_bogus: 1\n")
    )
    put(host, f"{WORK}/broken.yaml", broken.encode())
    items.append({"recipe": f"{WORK}/broken.yaml"})
    loaded = probe(host, SFT, "llamafactory_recipe.py", items)
    return cases, dict(zip([*cases, "broken"], loaded, strict=True))


@pytest.mark.parametrize("name", TRAIN_CASES)
def test_llamafactory_kt_loads_the_rendered_recipe_as_planned(train_results, name):
    cases, loaded = train_results
    plan, rendered, _ = cases[name]
    sft, kt, got = plan["sft"], plan["sft"]["kt"]["kt_config"], loaded[name]
    assert "error" not in got, got
    assert got["use_kt"] is True
    assert (got["cutoff_len"], got["batch"], got["grad_accum"], got["lora_rank"]) == (
        sft["cutoff_len"],
        sft["per_device_train_batch_size"],
        sft["gradient_accumulation_steps"],
        sft["lora_rank"],
    )
    assert (got["kt_backend"], got["kt_num_threads"], got["kt_threadpool_count"], got["kt_tp_enabled"]) == (
        kt["kt_backend"],
        kt["kt_num_threads"],
        kt["kt_threadpool_count"],
        kt["kt_tp_enabled"],
    )
    assert got["kt_lora_rank"] == sft["lora_rank"]  # derived by LLaMA-Factory, not set by ktinfra
    assert got["template_known"], got["template"]  # a chat template llamafactory-kt registers
    assert got["warmup_steps_of_1000"] == 100  # the 10 % warmup, as transformers-kt reads the recipe
    assert got["accelerate"] == {
        "num_processes": sft["launcher"]["num_processes"],
        "distributed_type": "DistributedType.FSDP",
        "fsdp_version": 2,
        "mixed_precision": "bf16",
        "main_process_port": 0,  # accelerate-kt's launch picks a free port for 0 (fed2ba2), 29500 without
    }
    assert rendered["argv"][:2] == ["/opt/kt/envs/kt-sft/bin/accelerate", "launch"]


def test_the_train_cases_cover_one_and_several_gpus_and_pools(train_results):
    cases, loaded = train_results
    assert loaded["4xl40s"]["accelerate"]["num_processes"] == 4
    assert loaded["h100"]["accelerate"]["num_processes"] == 1
    assert {loaded[name]["kt_threadpool_count"] for name in cases} == {1, 2}


def test_kt_kernel_refuses_an_unknown_kt_config_key(train_results):
    _, loaded = train_results
    assert loaded["broken"]["error"] == "TypeError: Unknown KTConfig fields: ['kt_bogus']"


def test_the_recorded_chat_templates_are_what_llamafactory_kt_registers(host):
    """render train judges a template by ktinfra/data/llamafactory-templates.yaml where the env is not on the
    rendering machine, and by reading data/template.py (ast) where it is: both must be the names the installed
    llamafactory-kt registers when it runs."""
    from ktinfra.render.chat_templates import recorded, registered

    code = "import json, llamafactory.data.template as t; "
    code += "print(json.dumps([t.__file__, sorted(t.TEMPLATES)]))"
    out = host.run(f"{SFT} -c {shlex.quote(code)}")
    assert out.rc == 0, out.stderr[-3000:]
    path, names = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(names) > 100
    assert registered(host.file(path).content_string) == names
    assert recorded()["current"]["names"] == names
