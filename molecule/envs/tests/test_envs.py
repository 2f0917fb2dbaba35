"""The real kt-0.7 envs installed from PyPI (through the wheelhouse) in the container."""

import json

INFER = "/opt/kt/envs/kt-kernel/bin/python"
SFT = "/opt/kt/envs/kt-sft/bin/python"


def test_venv_envs_installed_by_uv_without_bytecode(host):
    # kt_python_env_installer auto: uv for venvs; this scenario sets kt_python_env_compile_bytecode: false.
    # First in this file (the later tests import torch); -B and find_spec: looking torch up must neither
    # import it nor write a .pyc itself.
    assert host.check_output("/opt/ktinfra/uv/bin/uv --version").startswith("uv 0.13.8")
    find = "import importlib.util as u, os; print(os.path.dirname(u.find_spec('torch').origin))"
    for env in ("kt-kernel", "kt-sft"):
        torch_dir = host.check_output(f'/opt/kt/envs/{env}/bin/python -B -c "{find}"').splitlines()[-1]
        assert host.file(f"{torch_dir}-2.9.1.dist-info/INSTALLER").content_string.strip() == "uv"
        assert not host.file(f"{torch_dir}/__pycache__/__init__.cpython-311.pyc").exists
        assert not host.file(f"{torch_dir}/nn/__pycache__/functional.cpython-311.pyc").exists
    assert host.run("ls /var/cache/ktinfra/wheelhouse/uv-0.13.8-*.whl").rc == 0


def test_kt_kernel_imports_and_picks_the_cpu_variant(host):
    out = host.check_output(
        f"{INFER} -c 'import kt_kernel; print(kt_kernel.__cpu_variant__, kt_kernel.__version__)'"
    )
    variant, version = out.split()[-2:]
    assert version == "0.7.2"
    flags = host.file("/proc/cpuinfo").content_string
    # this CI CPU (AMD EPYC) has AVX2 but neither AVX-512 nor AMX: the AVX2 build must be the one loaded
    expected = "amx" if " amx_tile" in flags else ("avx512" if " avx512f" in flags else "avx2")
    assert variant.startswith(expected), out
    print(f"kt_kernel variant loaded: {variant}")


def test_sglang_launch_server_has_the_kt_flags(host):
    help_text = host.check_output(f"{INFER} -m sglang.launch_server --help")
    for flag in (
        "--kt-method",
        "--kt-weight-path",
        "--kt-cpuinfer",
        "--kt-threadpool-count",
        "--kt-num-gpu-experts",
    ):
        assert flag in help_text, flag


def test_sft_env_imports_llamafactory_with_kt(host):
    code = (
        "import dataclasses, ktransformers, kt_kernel; "
        "from llamafactory.hparams import ModelArguments; "
        'print("use_kt" in {f.name for f in dataclasses.fields(ModelArguments)})'
    )
    assert host.check_output(f"{SFT} -c '{code}'").splitlines()[-1] == "True"
    assert host.run("/opt/kt/envs/kt-sft/bin/llamafactory-cli version").rc == 0


def test_sglang_kept_out_of_the_sft_env(host):
    # the import itself must be what fails (a missing interpreter, rc 127, failed this check as well)
    result = host.run(f"{SFT} -c 'import sglang'")
    assert result.rc == 1 and "No module named 'sglang'" in result.stderr, result.stdout + result.stderr


def test_freezes_match_the_profile(host):
    for env, key in (("kt-kernel", "inference"), ("kt-sft", "sft")):
        freeze = f"/opt/kt/envs/{env}/ktinfra-freeze.txt"
        assert host.file(freeze).is_file
        out = host.run(
            f"/opt/ktinfra/tool/bin/ktinfra profile drift kt-0.7 --env {key} --freeze {freeze} --json"
        )
        assert out.rc == 0, out.stdout + out.stderr
        assert json.loads(out.stdout)["problems"] == []
    lines = host.file("/opt/kt/envs/kt-kernel/ktinfra-freeze.txt").content_string.splitlines()
    assert {"kt-kernel==0.7.2", "sglang-kt==0.7.2", "torch==2.9.1"} <= set(lines)


def test_env_sizes_reported(host):
    for env in ("kt-kernel", "kt-sft"):
        size = host.check_output(f"du -sb /opt/kt/envs/{env}").split()[0]
        print(f"env {env}: {int(size) / 1e9:.2f} GB")
        assert int(size) > 1e9
