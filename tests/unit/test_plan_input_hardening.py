"""Bad input to `ktinfra plan` found by session 11's audit: each is a one-line error (or a warning) before
anything is planned, never a traceback, a memory blow-up or a plan that render refuses later."""

from __future__ import annotations

import json
import re
from pathlib import Path

import model_configs
import pytest
from model_configs import GLM_4_5_AIR, QWEN3_NEXT_80B_A3B
from test_plan import SEED002, facts
from typer.testing import CliRunner

from ktinfra import catalog
from ktinfra.cli import app
from ktinfra.planner import PlanInputError, load_facts, plan

FACTS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "facts"


def _facts_file(tmp_path, data) -> str:
    path = tmp_path / "facts.json"
    path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    return str(path)


@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe{\x00", b"[" * 100_000 + b"]" * 100_000],
    ids=["not-utf8", "nested-too-deep"],
)
def test_an_unreadable_facts_file_is_refused(tmp_path, content):
    with pytest.raises(PlanInputError, match="is not JSON"):
        load_facts(_facts_file(tmp_path, content))


def test_two_gpus_with_one_index_are_refused(tmp_path):
    data = facts("dual-spr-2xnuma-4xl40s")
    data["gpus"][1]["index"] = data["gpus"][0]["index"]
    with pytest.raises(PlanInputError, match=r"gpus\[1\]\.index 0 is the index of an earlier GPU too"):
        load_facts(_facts_file(tmp_path, data))


@pytest.mark.parametrize("cc", ["9" * 5000, "9." + "0" * 5000, "1234.0"])
def test_a_compute_capability_no_gpu_has_is_refused(tmp_path, cc):
    """Before: any digits passed, and 5000 of them failed the plan later with Python's "Exceeds the limit
    (4300 digits)" message instead of naming the field."""
    data = facts("dual-spr-2xnuma-4xl40s")
    data["gpus"][0]["compute_capability"] = cc
    refusal = r'gpus\[0\]\.compute_capability must be a compute capability such as "9\.0"'
    with pytest.raises(PlanInputError, match=refusal):
        load_facts(_facts_file(tmp_path, data))


@pytest.mark.parametrize("cpus", ["0-999999999", "8192", "9-3"])
def test_cpu_lists_no_kernel_has_are_refused(tmp_path, cpus):
    data = facts(SEED002)
    data["cpu"]["numa_node_cpus"] = {"0": cpus}
    with pytest.raises(PlanInputError, match=r"cpu\.numa_node_cpus\.0 must be a CPU list"):
        load_facts(_facts_file(tmp_path, data))


def _model(tmp_path, config: dict | bytes):
    path = tmp_path / "model"
    path.mkdir(exist_ok=True)
    body = config if isinstance(config, bytes) else json.dumps(config).encode()
    (path / "config.json").write_bytes(body)
    return str(path)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"num_hidden_layers": 10**9}, "num_hidden_layers must be an integer from 1 to 10000"),
        ({"tie_word_embeddings": "false"}, 'tie_word_embeddings must be true or false, got "false"'),
        ({"moe_intermediate_size": 0}, "moe_intermediate_size must be a positive integer, got 0"),
        ({"num_key_value_heads": 128}, "num_key_value_heads must be an integer from 1 to 96, got 128"),
        ({"num_key_value_heads": 7}, "num_attention_heads 96 is not a multiple of num_key_value_heads 7"),
    ],
)
def test_config_values_no_real_model_has(tmp_path, change, message):
    with pytest.raises(catalog.ModelConfigError, match=message.replace("(", r"\(")):
        catalog.resolve(_model(tmp_path, {**GLM_4_5_AIR, **change}))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"attn_output_gate": "no"}, 'attn_output_gate must be true or false, got "no"'),
        ({"layer_types": "linear_attention"}, 'layer_types must be a list, got "linear_attention"'),
    ],
)
def test_hybrid_attention_values_no_real_model_has(tmp_path, change, message):
    with pytest.raises(catalog.ModelConfigError, match=message):
        catalog.resolve(_model(tmp_path, {**QWEN3_NEXT_80B_A3B, **change}))


@pytest.mark.parametrize(
    "content", [b"\xff\xfe{\x00", b"[" * 100_000 + b"]" * 100_000], ids=["not-utf8", "nested-too-deep"]
)
def test_an_unreadable_config_json_is_named(tmp_path, content):
    path = _model(tmp_path, content)
    with pytest.raises(catalog.ModelConfigError, match=f"{path}/config.json: not valid JSON"):
        catalog.resolve(path)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"host": "0.0.0.0"}, "--host 0.0.0.0 takes requests from the network: pass --api-key-set"),
        ({"host": "my host"}, "--host 'my host' contains ' '"),
        ({"lora": {"style": "rel/dir"}}, "--lora style directory must be an absolute path"),
        ({"lora": {"my adapter": "/x"}}, "--lora adapter name 'my adapter' must be 1-64 characters"),
    ],
)
def test_serve_options_render_would_refuse_are_refused_by_plan(options, message):
    with pytest.raises(PlanInputError, match=message):
        plan(facts(SEED002), "Qwen3-30B-A3B", "serve", **options)


@pytest.mark.parametrize("host", ["::1", "localhost", "127.0.0.2"])
def test_loopback_hosts_need_no_key(host):
    assert plan(facts(SEED002), "Qwen3-30B-A3B", "serve", host=host)["serve"]["host"] == host


def test_a_wildcard_bind_with_a_key_is_planned():
    result = plan(facts(SEED002), "Qwen3-30B-A3B", "serve", host="0.0.0.0", api_key_set=True)
    assert result["feasible"] and result["serve"]["host"] == "0.0.0.0"


@pytest.mark.parametrize("kernel", [None, "unknown"])
def test_an_unknown_kernel_is_a_warning_when_amx_tiles_are_needed(kernel):
    data = facts(SEED002)
    data["os"]["kernel"] = kernel
    result = plan(data, "Qwen3-30B-A3B", "serve")
    assert result["serve"]["kt_method"] == "AMXINT8"
    assert any(w.startswith("kernel version unknown") and "5.16" in w for w in result["warnings"])


def test_an_unknown_kernel_is_no_warning_without_amx():
    data = facts("xeon8352v-4090-noamx")
    data["os"]["kernel"] = None
    assert not any("kernel version" in w for w in plan(data, "Qwen3-30B-A3B", "serve")["warnings"])


def test_a_shortfall_never_reads_as_equal_amounts():
    """Kimi-K2-Thinking on the RTX 4090: 25.79 GB needed, 25.76 GB there; one decimal shows 25.8 both."""
    problems = plan(facts(SEED002), "Kimi-K2-Thinking", "serve")["problems"]
    gpu = next(p for p in problems if "GPU memory" in p)
    assert gpu.startswith("needs 25.79 GB GPU memory") and gpu.endswith("has 25.76 GB")


def _int_paths(config: dict, prefix: tuple = ()):
    for key, value in config.items():
        if isinstance(value, dict):
            yield from _int_paths(value, (*prefix, key))
        elif isinstance(value, int) and not isinstance(value, bool):
            yield (*prefix, key)


HUGE_CONFIGS = {
    "DeepSeek-V3.2": model_configs.DEEPSEEK_V32,
    "Qwen3-VL-30B-A3B": model_configs.QWEN3_VL_30B_A3B,
    "Qwen3-Next-80B-A3B": model_configs.QWEN3_NEXT_80B_A3B,
}
HUGE_CONFIG_CASES = [(name, path) for name, config in HUGE_CONFIGS.items() for path in _int_paths(config)]


@pytest.mark.parametrize(
    "name, path", HUGE_CONFIG_CASES, ids=[f"{n}:{'.'.join(p)}" for n, p in HUGE_CONFIG_CASES]
)
def test_a_config_number_of_400_digits_is_refused_or_unused(tmp_path, name, path):
    """Before: 168 such cases ended in OverflowError tracebacks inside the sizing's float arithmetic."""
    config = json.loads(json.dumps(HUGE_CONFIGS[name]))
    node = config
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = int("9" * 400)
    model = _model(tmp_path, config)
    for mode in ("serve", "sft"):
        try:
            result = plan(facts("h100-amx"), model, mode)
        except PlanInputError as error:
            assert path[-1] in str(error) and "9" * 38 not in str(error)
        else:
            json.dumps(result, allow_nan=False)  # a number read from it would have overflowed


@pytest.mark.parametrize(
    ("host", "hint"),
    [
        ("--help", ""),
        ("-x", ""),
        ("a;b|c", ""),
        ("x_y", ""),
        ("[::1]", " (write an IPv6 address without brackets)"),
    ],
)
def test_a_bind_host_that_is_no_address_or_name_is_refused(host, hint):
    """Before: --host=--help went into the server argv, where SGLang's argparse reads it as a flag."""
    with pytest.raises(
        PlanInputError, match=re.escape(f"--host {host!r} is not an IP address or a host name{hint}")
    ):
        plan(facts("h100-amx"), "Qwen3-30B-A3B", "serve", host=host, api_key_set=True)


@pytest.mark.parametrize("host", ["::1", "0.0.0.0", "gpu1.lab", "localhost", "10.0.0.5"])
def test_addresses_and_host_names_still_plan(host):
    assert (
        plan(facts("h100-amx"), "Qwen3-30B-A3B", "serve", host=host, api_key_set=True)["serve"]["host"]
        == host
    )


def test_render_refuses_a_plan_host_that_is_no_address():
    from ktinfra.render import RenderError, render_serve

    data = facts("h100-amx")
    result = plan(data, "Qwen3-30B-A3B", "serve")
    result["serve"]["host"] = "--help"
    with pytest.raises(RenderError, match="serve.host '--help' is not an IP address or a host name"):
        render_serve(result, name="q", model_path="/m", weight_path="/w", api_key="k")


LONG = "/tmp/" + "x" * 300


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-m", "Qwen3-30B-A3B", "--stack", ""], "error: --stack is empty"),  # fell back to kt-0.7
        (
            ["-m", "Qwen3-30B-A3B", "--cpu-format", " "],
            "error: --cpu-format is empty",
        ),  # fell back to the default
        (["-m", LONG], f"error: --model {LONG[:80]!r}: File name too long"),
        (["-m", "Qwen3-30B-A3B", "--facts", "/dev/zero"], "error: facts file /dev/zero is over 16 MiB"),
    ],
)
def test_plan_options_that_were_dropped_or_crashed_are_one_error_line(args, message):
    """Before: '' fell back to the default, ENAMETOOLONG was a traceback, /dev/zero took all memory."""
    extra = [] if "--facts" in args else ["--facts", str(FACTS_DIR / "h100-amx.json")]
    result = CliRunner().invoke(app, ["plan", *args, *extra])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr


def test_plan_from_a_path_too_long_is_one_error_line():
    result = CliRunner().invoke(app, ["plan", "-m", "Qwen3-30B-A3B", "--from", LONG])
    assert result.exit_code == 1 and result.stderr == f"error: --from {LONG}: File name too long\n"


def test_cutoff_len_beyond_any_recipe_is_a_usage_error_not_infeasible():
    result = CliRunner().invoke(
        app,
        [
            "plan",
            "-m",
            "Qwen3-30B-A3B",
            "--mode",
            "sft",
            "--cutoff-len",
            str(10**20),
            "--facts",
            str(FACTS_DIR / "h100-amx.json"),
        ],  # fmt: skip
    )
    assert result.exit_code == 1 and "Invalid value for '--cutoff-len'" in result.output


@pytest.mark.parametrize("kind", [["x"], 5, ""])
def test_a_model_type_that_is_no_name_is_refused(tmp_path, kind):
    """Before: ["x"] became the plan's architecture "['x']"."""
    with pytest.raises(catalog.ModelConfigError, match="config.json model_type must be a name"):
        catalog.resolve(_model(tmp_path, {**GLM_4_5_AIR, "model_type": kind}))


@pytest.mark.parametrize(
    ("model", "cpu_format", "message"),
    [
        (
            "Qwen3-30B-A3B",
            "FP8",
            "error: --cpu-format FP8 needs an FP8 checkpoint; Qwen3-30B-A3B ships bf16\n",
        ),
        (
            "Qwen3-30B-A3B",
            "RAWINT4",
            "error: --cpu-format RAWINT4 needs an INT4 checkpoint; Qwen3-30B-A3B ships bf16\n",
        ),
        (
            "Kimi-K2-Thinking",
            "AMXINT8",
            "error: Kimi-K2-Thinking ships int4 experts, which only kt-kernel's RAWINT4 reads; --cpu-format "
            "AMXINT8 would need a BF16 checkpoint\n",
        ),
        (
            "Kimi-K2-Thinking",
            "FP8",
            "error: Kimi-K2-Thinking ships int4 experts, which only kt-kernel's RAWINT4 reads; --cpu-format "
            "FP8 would need an FP8 checkpoint\n",
        ),
    ],
)
def test_a_cpu_format_that_cannot_read_the_checkpoint_is_bad_input(model, cpu_format, message):
    """Whatever the host: exit 1 and one error line before any output. Before: an int4 checkpoint with
    AMXINT8 was an infeasible plan (exit 2, printed), FP8 on bf16 an error from the sizing."""
    args = ["plan", "-m", model, "--cpu-format", cpu_format, "--facts", str(FACTS_DIR / "h100-amx.json")]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", message)
