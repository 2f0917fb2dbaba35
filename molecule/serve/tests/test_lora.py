"""Verify of molecule/serve: train -> kt-kernel's own converter -> serve list -> instance restarted with LoRA.

prepare.yml left a finished KT training output (scripts/tiny_model.py --kt-lora-out) in outputs/tiny-sft;
train.yml converted it with convert_kt_to_sglang_adapter.py from the kt-kernel 0.7.2 wheel and handed it to
instance `tiny`, and its last play re-applied kt_serve, whose handler restarted `tiny`.
"""

from __future__ import annotations

import json

from ansible_run import REPO, main_pid, probe_pin, run_playbook, serve_args_of

PLAYBOOKS = REPO / "playbooks"
KT_ENV = "/opt/kt/envs/kt-kernel"
CONVERTER = f"{KT_ENV}/lib/python3.11/site-packages/kt_kernel/sft/convert_kt_to_sglang_adapter.py"
OUTPUT = "/srv/ktinfra/outputs/tiny-sft"
ADAPTER = "/srv/ktinfra/loras/tiny-sft"
MODEL = "/srv/ktinfra/models/tiny-qwen3-moe"


def adapter_header(host, path: str) -> dict:
    script = (
        "import json, sys; from safetensors import safe_open; f = safe_open(sys.argv[1], 'pt'); "
        "print(json.dumps({k: list(f.get_slice(k).get_shape()) for k in f.keys()}))"
    )
    return json.loads(host.check_output(f'{KT_ENV}/bin/python -c "{script}" {path}'))


def test_training_output_is_the_kt_layout(host):
    for name in ("adapter_config.json", "adapter_model.safetensors", "fused_expert_lora.safetensors",
                 "kt_adapter_manifest.json"):  # fmt: skip
        assert host.file(f"{OUTPUT}/{name}").is_file, name


def test_the_wheels_converter_ran_under_systemd(host):
    env = host.file("/etc/ktinfra/lora-convert/tiny-sft.env")
    assert env.mode == 0o600
    args = f"{OUTPUT} /srv/ktinfra/loras/.tiny-sft.partial --base-model-name-or-path {MODEL}"
    assert args in env.content_string
    unit = host.file("/etc/systemd/system/ktinfra-lora-convert@.service").content_string
    assert f"ExecStart={KT_ENV}/bin/python {CONVERTER} $KT_LORA_CONVERT_ARGS" in unit
    unit_name = "ktinfra-lora-convert@tiny-sft.service"
    show = host.check_output(f"systemctl show -p Result -p ExecMainStatus {unit_name}")
    assert show.splitlines() == ["Result=success", "ExecMainStatus=0"]
    journal = host.check_output(f"journalctl -u {unit_name} -o cat --no-pager")
    assert "Converted KT fused expert LoRA adapter:" in journal


def test_converted_adapter_is_complete_and_nothing_staged_is_left(host):
    assert not host.file("/srv/ktinfra/loras/.tiny-sft.partial").exists
    listing = host.check_output(f"ls -A {ADAPTER}").split()
    assert sorted(listing) == [".ktinfra-convert-done", "adapter_config.json", "adapter_model.safetensors"]
    config = json.loads(host.file(f"{ADAPTER}/adapter_config.json").content_string)
    trained = json.loads(host.file(f"{OUTPUT}/adapter_config.json").content_string)
    assert config["base_model_name_or_path"] == MODEL
    assert config["r"] == trained["r"] and config["lora_alpha"] == trained["lora_alpha"]
    assert {"q_proj", "v_proj", "gate_proj", "up_proj", "down_proj"} <= set(config["target_modules"])


def test_fused_experts_became_per_expert_peft_tensors(host):
    fused = adapter_header(host, f"{OUTPUT}/fused_expert_lora.safetensors")
    served = adapter_header(host, f"{ADAPTER}/adapter_model.safetensors")
    experts, rank, hidden = fused["layers.0.experts.gate_lora_a"]
    assert served["model.layers.0.mlp.experts.0.gate_proj.lora_A.weight"] == [rank, hidden]
    per_expert = [k for k in served if ".mlp.experts." in k]
    assert len(per_expert) == len(fused) * experts
    assert any(".self_attn.q_proj.lora_A." in k for k in served)  # the PEFT part is merged in
    assert not any(k.startswith("base_model.model.") for k in served)


def test_adapter_handed_to_the_serve_instance(host):
    record = host.file("/etc/ktinfra/serve/tiny--tiny-sft.lora.json")
    assert record.mode == 0o644
    handover = json.loads(record.content_string)
    source = handover.pop("source")  # fingerprint of the output converted, as in the adapter's done marker
    assert handover == {"instance": "tiny", "name": "tiny-sft", "path": ADAPTER}
    files = ["adapter_config.json", "adapter_model.safetensors", "fused_expert_lora.safetensors"]
    assert sorted(source) == sorted([*files, "conversion"])
    # and the command that converted it: kt-kernel's converter, against the store's base model
    conversion = source["conversion"]
    assert conversion[:2] == [f"{KT_ENV}/bin/python", CONVERTER]
    assert conversion[conversion.index("--base-model-name-or-path") + 1] == MODEL
    assert json.loads(host.file(f"{ADAPTER}/.ktinfra-convert-done").content_string) == source
    plan = json.loads(host.file("/etc/ktinfra/serve/tiny.plan.json").content_string)
    lora = {"paths": {"tiny-sft": ADAPTER}, "max_loras_per_batch": 1, "backend": "triton"}
    assert plan["serve"]["lora"] == lora
    assert plan["serve"]["kt_num_gpu_experts"] == 0
    other = json.loads(host.file("/etc/ktinfra/serve/tiny-public.plan.json").content_string)
    assert other["serve"]["lora"] is None and other["serve"]["kt_num_gpu_experts"] == 8


def running_env(host, name: str) -> str:
    return serve_args_of(host, main_pid(host, f"ktinfra-serve@{name}.service"))


def test_instance_was_restarted_by_its_handler_with_the_adapter(host):
    """`tiny` started without the adapter in serve.yml; train.yml's hand-over restarted it (the handler's stop
    is in the journal) and the process that runs now was started with the LoRA flags."""
    journal = host.check_output("journalctl -u ktinfra-serve@tiny.service -o cat --no-pager")
    assert journal.count("Stopping ktinfra-serve@tiny.service") == 1, journal
    assert "--enable-lora --lora-paths tiny-sft=/srv/ktinfra/loras/tiny-sft" in running_env(host, "tiny")
    public = host.check_output("journalctl -u ktinfra-serve@tiny-public.service -o cat --no-pager")
    assert "Stopping" not in public and "--enable-lora" not in running_env(host, "tiny-public")


def test_interrupted_conversion_is_redone_and_never_served_half_written(host):
    """A conversion killed mid-write leaves only the staging directory (no done marker): the adapter is
    not in loras/, and the next train.yml run converts again and renames the complete result into place."""
    before = host.check_output(f"sha256sum {ADAPTER}/adapter_model.safetensors").split()[0]
    convert, converted = "ktinfra-lora-convert@tiny-sft.service", "Converted KT fused expert LoRA adapter:"
    conversions = _count(host, convert, converted)
    staging = "/srv/ktinfra/loras/.tiny-sft.partial"
    host.check_output(f"mv {ADAPTER} /tmp/tiny-sft.done && mkdir {staging} && head -c 4096 /dev/urandom > "
                      f"{staging}/adapter_model.safetensors")  # fmt: skip
    placed = False
    try:
        rc, output = run_playbook(PLAYBOOKS / "train.yml", probe_pin(host), "--tags", "train")
        # read before the finally puts the set-aside adapter back: that one has a marker and the same bytes
        placed = host.file(f"{ADAPTER}/.ktinfra-convert-done").is_file
    finally:
        host.run(f"test -e {ADAPTER} || mv /tmp/tiny-sft.done {ADAPTER}")
    assert rc == 0, output[-3000:]
    assert placed, output[-3000:]  # the run itself renamed a complete conversion into place
    assert _count(host, convert, converted) == conversions + 1  # converted again, under systemd
    assert not host.file(staging).exists
    assert host.check_output(f"sha256sum {ADAPTER}/adapter_model.safetensors").split()[0] == before
    host.check_output("rm -rf /tmp/tiny-sft.done")
    # same adapter, same list: kt_serve ran again (the conversion is a hand-over) and left `tiny` running
    assert "TASK [kt_serve : " in output
    journal = host.check_output("journalctl -u ktinfra-serve@tiny.service -o cat --no-pager")
    assert journal.count("Stopping ktinfra-serve@tiny.service") == 1


def _count(host, unit: str, line: str) -> int:
    return host.check_output(f"journalctl -u {unit} -o cat --no-pager").count(line)


def test_a_retrained_run_is_converted_again_and_restarts_its_instance(host):
    """Training again rewrites outputs/tiny-sft (here: the same bytes in newer files, train_results.json last,
    as LLaMA-Factory writes it after the adapter; without it kt_train's tasks/finished.yml sees a run that did
    not reach its end and converts nothing): the next train.yml run
    converts it again under systemd, swaps the result in whole and restarts `tiny` onto it, although the
    adapter's path, and so the env file, stay the same; the run after that changes nothing."""
    convert, serve = "ktinfra-lora-convert@tiny-sft.service", "ktinfra-serve@tiny.service"
    converted, stopped = "Converted KT fused expert LoRA adapter:", "Stopping ktinfra-serve@tiny.service"
    record = "/etc/ktinfra/serve/tiny--tiny-sft.lora.json"
    before = json.loads(host.file(record).content_string)["source"]
    conversions, stops, pid = (
        _count(host, convert, converted),
        _count(host, serve, stopped),
        main_pid(host, serve),
    )
    host.check_output(f"touch {OUTPUT}/fused_expert_lora.safetensors {OUTPUT}/adapter_model.safetensors")
    host.check_output(f"touch {OUTPUT}/train_results.json")  # save_metrics, after the adapter: a finished run
    rc, output = run_playbook(PLAYBOOKS / "train.yml", probe_pin(host), "--tags", "train")
    assert rc == 0, output[-3000:]
    assert _count(host, convert, converted) == conversions + 1
    source = json.loads(host.file(record).content_string)["source"]
    assert (
        source != before
        and json.loads(host.file(f"{ADAPTER}/.ktinfra-convert-done").content_string) == source
    )
    for beside in (".tiny-sft.partial", ".tiny-sft.partial.source.json", ".tiny-sft.old"):
        assert not host.file(f"/srv/ktinfra/loras/{beside}").exists, beside  # no staging or old copy left
    assert _count(host, serve, stopped) == stops + 1 and main_pid(host, serve) != pid
    assert "--enable-lora --lora-paths tiny-sft=/srv/ktinfra/loras/tiny-sft" in running_env(host, "tiny")
    pid = main_pid(host, serve)
    rc, output = run_playbook(PLAYBOOKS / "train.yml", probe_pin(host), "--tags", "train")
    assert rc == 0, output[-3000:]
    assert _count(host, convert, converted) == conversions + 1 and main_pid(host, serve) == pid
