"""`ktinfra image build` refuses bad input before packer, docker or AWS is touched."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from image_moto import DLAMI, publish_ami
from moto import mock_aws
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.image import REPO_ROOT, ImageError, build, dockercli

SMOKE = str(Path(__file__).parents[1] / "integration" / "image" / "smoke-profile.yaml")


@pytest.fixture
def ec2(monkeypatch):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    with mock_aws():
        yield boto3.client("ec2", region_name="eu-north-1")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"source": "virtualbox"}, "unknown source 'virtualbox'; choose one of: docker, amazon-ebs"),
        ({"keep": ["weights"]}, "--keep accepts wheelhouse, models, tokens; got weights"),
        ({"playbook": Path("/nonexistent/image.yml")}, "playbook /nonexistent/image.yml not found"),
        ({"profile": "kt-9"}, "unknown stack profile 'kt-9'"),
        ({"profile": SMOKE, "envs": ["training"]}, "no env of profile smoke matches"),
    ],
)
def test_bad_input_refused(kwargs, message):
    with pytest.raises(ImageError, match=message.replace("(", r"\(")):
        build.prepare(build.BuildRequest(**kwargs))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tag", "BAD TAG"], "error: --tag 'BAD TAG' is not a docker tag"),
        (["--tag", "-x"], "error: --tag '-x' is not a docker tag"),
        (["--tag", "t" * 129], "is not a docker tag"),
        (["--repository", "Bad/Repo"], "error: --repository 'Bad/Repo' is not a docker repository name"),
        (["--repository", "ktinfra//kt"], "is not a docker repository name"),
        # the docs' comma list is read as one (before: "got models,weights"), each name checked
        (["--keep", "models,weights"], "error: --keep accepts wheelhouse, models, tokens; got weights"),
        # before: accepted, and the image shipped an empty wheelhouse (a mount is not committed)
        (["--keep", "models,wheelhouse"], "error: --keep wheelhouse: the docker build mounts the wheelhouse"),
    ],
)
def test_bad_docker_tag_or_repository_is_refused_before_packer(tmp_path, fake_docker, args, message):
    # packer validate takes any string here; the docker-tag post-processor failed only after the whole
    # build (a kt-0.7 build is ~15 min and a 19 GB docker commit)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["image", "build", "--profile", SMOKE, "--out", str(out), "--packer", "/nonexistent", *args]
    )
    assert result.exit_code == 1 and message in result.output, result.output
    assert not out.exists()


def test_profile_name_that_is_no_docker_tag_needs_tag(tmp_path, fake_docker):
    site = tmp_path / "site.yaml"
    site.write_text(Path(SMOKE).read_text().replace("name: smoke", "name: site+cu128"))
    req = build.BuildRequest(profile=str(site), out_root=tmp_path / "out", wheelhouse=tmp_path / "wh")
    with pytest.raises(ImageError, match=r"the profile name 'site\+cu128' \(the default tag\).*give --tag"):
        build.prepare(req)
    req.tag = "site-cu128"
    prep = build.prepare(req)
    assert prep.variables["docker_tag"] == "site-cu128"
    # docker container names take no +
    assert prep.variables["docker_container_name"].startswith("image-build-site_cu128-")


def test_registry_repositories_are_accepted(tmp_path, fake_docker):
    for repository in ("localhost:5000/ktinfra/kt", "registry.example.com/lab/kt", "kt", "a__b/c-d.e"):
        req = build.BuildRequest(profile=SMOKE, repository=repository, out_root=tmp_path / "o")
        assert build.prepare(req).variables["docker_repository"] == repository


def test_amazon_ebs_resolves_ami_and_volume(ec2):
    publish_ami("eu-north-1", "ami-000000000000000d1", DLAMI.format("20261001"), "2026-10-01T00:00:00")
    prep = build.prepare(build.BuildRequest(source="amazon-ebs", profile=SMOKE, region="eu-north-1"), ec2=ec2)
    assert prep.variables["aws_source_ami"] == "ami-000000000000000d1"
    assert prep.variables["aws_root_volume_gb"] == 30  # smoke profile's image.root_volume_gb
    assert prep.variables["labels"]["ktinfra.profile"] == "smoke"
    assert prep.extra["instance"]["manufacturer"] == "Intel"


def test_amazon_ebs_refuses_non_amx_type_and_empty_region(ec2):
    with pytest.raises(ImageError, match="g6e.xlarge is not a family with AMX CPUs"):
        build.prepare(
            build.BuildRequest(source="amazon-ebs", instance_type="g6e.xlarge", region="eu-north-1"), ec2=ec2
        )
    with pytest.raises(ImageError, match="no NVIDIA Deep Learning base AMI found in region eu-north-1"):
        build.prepare(build.BuildRequest(source="amazon-ebs", region="eu-north-1"), ec2=ec2)


def test_write_inputs_gives_packer_and_ansible_their_files(ec2, tmp_path):
    publish_ami("eu-north-1", "ami-000000000000000d1", DLAMI.format("20261001"), "2026-10-01T00:00:00")
    prep = build.prepare(build.BuildRequest(source="amazon-ebs", profile=SMOKE, region="eu-north-1"), ec2=ec2)
    variables = json.loads(build.write_inputs(prep, tmp_path).read_text())
    assert variables["output_dir"] == str(tmp_path)
    extra = json.loads(Path(variables["ansible_vars_file"]).read_text())
    assert extra["ktinfra_image_envs"]["kt-kernel"]["pins"] == ["numpy==2.1.3", "packaging==24.2"]
    assert json.loads(Path(variables["build_spec_file"]).read_text())["envs"] == extra["ktinfra_image_envs"]


def test_write_inputs_gives_packer_absolute_paths_for_a_relative_out(ec2, tmp_path, monkeypatch):
    # packer runs with the checkout as its cwd: `--out builds` from another directory made it look for
    # builds/.../variables.pkrvars.json under the checkout ("Failed to open file")
    publish_ami("eu-north-1", "ami-000000000000000d1", DLAMI.format("20261001"), "2026-10-01T00:00:00")
    prep = build.prepare(build.BuildRequest(source="amazon-ebs", profile=SMOKE, region="eu-north-1"), ec2=ec2)
    monkeypatch.chdir(tmp_path)
    Path("builds").mkdir()
    var_file = build.write_inputs(prep, Path("builds"))
    assert var_file.is_absolute() and var_file == tmp_path / "builds" / "variables.pkrvars.json"
    variables = json.loads(var_file.read_text())
    for key in ("output_dir", "ansible_vars_file", "build_spec_file"):
        assert Path(variables[key]).is_absolute() and Path(variables[key]).exists(), key


def _required_template_variables() -> set[str]:
    """The variables of images/kt.pkr.hcl without a default: ktinfra must set each, for every source."""
    text = (REPO_ROOT / "images" / "kt.pkr.hcl").read_text()
    blocks = re.findall(r'^variable "([\w-]+)" \{\n(.*?)^\}', text, flags=re.M | re.S)
    return {name for name, body in blocks if not re.search(r"^\s*default\s*=", body, flags=re.M)}


def test_template_takes_wheelhouse_and_systemd_options_from_ktinfra(ec2, fake_docker, tmp_path):
    # one source of truth: the in-image wheelhouse the play fills is the one packer bind-mounts, validates
    # and cleans, and the build container boots with the options `image verify` boots the image with
    publish_ami("eu-north-1", "ami-000000000000000d1", DLAMI.format("20261001"), "2026-10-01T00:00:00")
    for req in (
        build.BuildRequest(source="amazon-ebs", profile=SMOKE, region="eu-north-1"),
        build.BuildRequest(profile=SMOKE, out_root=tmp_path / "o", wheelhouse=tmp_path / "w"),
    ):
        stage = tmp_path / req.source
        stage.mkdir()
        variables = json.loads(build.write_inputs(build.prepare(req, ec2=ec2), stage).read_text())
        extra = json.loads(Path(variables["ansible_vars_file"]).read_text())
        assert variables["wheelhouse"] == extra["ktinfra_wheelhouse"] == build.WHEELHOUSE_IN_IMAGE
        assert variables["docker_systemd_run_args"] == dockercli.SYSTEMD_RUN_ARGS
        assert _required_template_variables() <= set(variables)
    assert {"wheelhouse", "docker_systemd_run_args"} <= _required_template_variables()


def test_cli_reports_bad_source_cleanly(tmp_path):
    result = CliRunner().invoke(app, ["image", "build", "--source", "qemu", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "unknown source 'qemu'" in result.output
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n- b\n", "must set name and generation"),
        ('name: p\ngeneration: current\npython: "3.11"\nenvs: [a, b]\n', "envs must map env keys"),
        ("name: p\ngeneration: [current\n", "is not valid YAML"),
    ],
)
def test_cli_reports_bad_profile_file_cleanly(tmp_path, text, message):
    profile = tmp_path / "site.yaml"
    profile.write_text(text)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["image", "build", "--profile", str(profile), "--out", str(out)])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.output.startswith("error: ") and message in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_a_profile_the_image_build_cannot_install_is_refused_before_packer(tmp_path):
    """kt-0.4-autodl patches its SFT env with conda and leaves its GitHub wheels' sha256 to the user; the
    image play makes venvs with no way to pass pins, so the documented build failed inside Packer."""
    out = tmp_path / "out"
    args = ["image", "build", "--profile", "kt-0.4-autodl", "--out", str(out), "--packer", "/bin/false"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and not out.exists()
    assert result.output.startswith(
        "error: profile kt-0.4-autodl cannot be baked into an image: env kt-kernel builds kt-kernel from "
        "source for the CPU it is built on (host_cpu), so an image would carry the build machine's kernels; "
        "env kt-sft is patched with conda (libstdcxx-ng, gcc_impl_linux-64, cuda-runtime); env kt-sft has "
        "wheel files without sha256: ktransformers, flash-attn."
    )


@pytest.mark.parametrize("source", ["docker", "amazon-ebs"])
def test_the_legacy_inference_env_is_refused_by_the_check_alone(source):
    """Its kt-kernel is compiled -march=native where the build runs (CI: an AMD EPYC without AVX-512);
    `image build --check --env inference` said "input ok"."""
    args = [
        "image",
        "build",
        "--check",
        "--profile",
        "kt-0.4-autodl",
        "--env",
        "inference",
        "--source",
        source,
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "env kt-kernel builds kt-kernel from source for the CPU it is built on" in result.output


def test_no_base_ami_with_the_profiles_python_is_known_from_the_names():
    """A profile of Python 3.11 (no Deep Learning AMI ships it) passed --check and failed after make image
    had installed packer; with --source-ami the AMI's own name is checked later, against AWS."""
    from ktinfra.image import aws

    with pytest.raises(ImageError, match="no NVIDIA Deep Learning base AMI ships Python 3.11"):
        aws.usable_ami_patterns(["3.11"])
    assert aws.usable_ami_patterns(["3.12"]) and aws.usable_ami_patterns(None) == list(aws.AMI_NAME_PATTERNS)


def test_cli_reports_missing_aws_credentials_cleanly(tmp_path, monkeypatch):
    # no credentials anywhere boto3 looks (the metadata service is off, so nothing goes on the network)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    for key in ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    out = tmp_path / "out"
    args = ["image", "build", "--source", "amazon-ebs", "--profile", SMOKE, "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert result.output.startswith("error: AWS credentials not found")
    assert not out.exists()


@pytest.mark.parametrize(
    ("itype", "message"),
    [
        ("m6a.large", "error: m6a.large is not a family with AMX CPUs (needs Intel Sapphire Rapids or later"),
        ("large", "error: 'large' is not an EC2 instance type (like m7i.8xlarge)"),
    ],
)
def test_instance_type_without_amx_is_refused_before_aws_credentials(tmp_path, monkeypatch, itype, message):
    """Before: without credentials, `--instance-type m6a.large` was told "AWS credentials not found"."""

    def client(region):
        raise AssertionError(f"an EC2 client was made for {region}")

    monkeypatch.setattr(build.aws, "ec2_client", client)
    out = tmp_path / "out"
    args = ["image", "build", "--source", "amazon-ebs", "--profile", SMOKE, "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--instance-type", itype])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith(message), result.output
    assert not out.exists()


def test_aws_request_failure_is_reported(ec2):
    class Unreachable:
        exceptions = ec2.exceptions

        def describe_instance_types(self, **_):
            raise EndpointConnectionError(endpoint_url="https://ec2.eu-north-1.amazonaws.com/")

    req = build.BuildRequest(source="amazon-ebs", profile=SMOKE, region="eu-north-1")
    with pytest.raises(ImageError, match="AWS request in region eu-north-1 failed: Could not connect"):
        build.prepare(req, ec2=Unreachable())


def _make_n(*args: str) -> list[list[str]]:
    """The commands `make -n` would run (amazon-ebs: no recursive make, nothing is executed)."""
    if not shutil.which("make"):
        pytest.skip("no make")
    proc = subprocess.run(
        ["make", "-n", "--no-print-directory", "-C", str(REPO_ROOT), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = proc.stdout.replace("\\\n", " ").splitlines()
    return [shlex.split(line) for line in lines if "ktinfra image" in line]


def test_make_image_passes_a_profile_path_with_spaces_whole(tmp_path):
    profile = "/srv/lab profiles/site.yaml"
    check, cmd = _make_n("image", "IMAGE_SOURCE=amazon-ebs", f"IMAGE_PROFILE={profile}")
    assert check == [*cmd, "--check"]
    assert cmd[cmd.index("--profile") + 1] == profile
    assert cmd[cmd.index("--tag") + 1] == "site"
    [verify] = _make_n("image-verify", f"IMAGE_PROFILE={profile}")
    assert verify[-3:] == ["ktinfra/kt:site", "--out", "out/image"]
    [default] = _make_n("image-verify")
    assert default[-3] == "ktinfra/kt:kt-0.7"


def test_make_image_checks_the_input_before_image_deps_installs_anything():
    """Before: image-deps (apt-get install packer, docker, the base image) ran first; a typo in
    IMAGE_PROFILE was found only after the host had been changed. (-o: a .venv older than pyproject.toml
    would otherwise print the venv's own recipe first, whatever the order of the image recipe.)"""
    proc = subprocess.run(
        ["make", "-n", "--no-print-directory", "-C", str(REPO_ROOT), "-o", ".venv/.installed", "image"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines = proc.stdout.splitlines()
    first_check = next(i for i, line in enumerate(lines) if line.endswith("--check"))
    deps = next(i for i, line in enumerate(lines) if "image-deps" in line or "apt-get" in line)
    assert first_check < deps


@pytest.mark.parametrize("args", ["--tag mine", "--out=/tmp/x", "--repository lab/kt --keep models"])
def test_make_image_refuses_image_args_that_verify_would_not_see(args):
    """Before: IMAGE_ARGS reached the build only: with --out or --tag, verify looked for another manifest or
    booted the stale ktinfra/kt:kt-0.7."""
    proc = subprocess.run(
        ["make", "-n", "--no-print-directory", "-C", str(REPO_ROOT), "image", f"IMAGE_ARGS={args}"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode != 0 and "use IMAGE_TAG, IMAGE_REPO, IMAGE_OUT" in proc.stderr
    assert "ktinfra image build" not in proc.stdout


@pytest.mark.parametrize("args", ["--env inference", "--env=sft --keep models"])
def test_make_image_with_envs_but_no_tag_stops_before_the_full_images_tag_is_taken(args):
    """Before: make passed its default IMAGE_TAG (kt-0.7) and the serving-only image replaced the full one."""
    make = ["make", "-n", "--no-print-directory", "-C", str(REPO_ROOT), "image", f"IMAGE_ARGS={args}"]
    proc = subprocess.run(make, capture_output=True, text=True)
    assert (
        proc.returncode != 0
        and "no IMAGE_TAG is given" in proc.stderr
        and "IMAGE_TAG=kt-0.7-inference" in proc.stderr
    )
    assert "ktinfra image build" not in proc.stdout
    proc = subprocess.run([*make, "IMAGE_TAG=kt-0.7-part"], capture_output=True, text=True)
    assert proc.returncode == 0 and "--tag kt-0.7-part" in proc.stdout, proc.stderr


def test_image_build_check_asks_no_docker_aws_or_packer(tmp_path, monkeypatch):
    def asked(*_args, **_kwargs):
        raise AssertionError("--check asked docker or AWS")

    monkeypatch.setattr(dockercli, "ensure_daemon", asked)
    monkeypatch.setattr(dockercli, "_docker", asked)
    monkeypatch.setattr(build.aws, "ec2_client", asked)
    out = tmp_path / "out"
    base = ["image", "build", "--profile", SMOKE, "--out", str(out), "--packer", "/nonexistent", "--check"]
    result = CliRunner().invoke(app, base)
    assert result.exit_code == 0 and "input ok: build smoke-docker" in result.output, result.output
    result = CliRunner().invoke(app, [*base, "--source", "amazon-ebs", "--instance-type", "g6e.xlarge"])
    assert result.exit_code == 1 and "g6e.xlarge is not a family with AMX CPUs" in result.output
    result = CliRunner().invoke(app, ["image", "build", "--profile", "kt-9", "--check"])
    assert result.exit_code == 1 and "unknown stack profile 'kt-9'" in result.output
    assert not out.exists()


def test_build_summary_names_pins_whose_imports_were_not_checked(capsys):
    from ktinfra.commands.image import _print_build

    why = "no top_level.txt, and its RECORD lists no importable module"
    _print_build(
        {
            "image": {"source": "docker", "tag": "ktinfra/kt:smoke", "id": "sha256:1"},
            "profile": {"name": "smoke"},
            "build": {"duration_s": 1.0, "output_dir": "/o"},
            "pins": [],
            "sizes": {},
            "envs": {"kt-kernel": {"not_checked": {"metapkg": why}}, "old": {"not_checked": None}},
        }
    )
    assert f"env kt-kernel: import of metapkg not checked ({why})" in capsys.readouterr().out


# amazon-ebs: the AMI is named ktinfra-kt-<profile>-<timestamp>, and EC2 takes no + in an AMI name


def _site_profile(tmp_path: Path, name: str) -> Path:
    site = tmp_path / "site.yaml"
    site.write_text(Path(SMOKE).read_text().replace("name: smoke", f"name: {name}"))
    return site


@pytest.fixture
def no_aws(monkeypatch):
    def asked(*args, **_):
        raise AssertionError(f"AWS was asked: {args}")

    monkeypatch.setattr(build.aws, "look_up", asked)


def test_profile_name_with_plus_is_refused_for_amazon_ebs_before_aws_or_packer(tmp_path, no_aws):
    # packer 1.6.6 refused it only at `packer validate` ("AMIName should only contain ..."), naming no
    # profile, after the boto3 look-ups and with the stage directory written
    site = _site_profile(tmp_path, "site+cu128")
    out = tmp_path / "out"
    args = ["image", "build", "--source", "amazon-ebs", "--profile", str(site), "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--packer", "/nonexistent"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    text = " ".join(result.output.split())
    assert text.startswith(
        "error: profile 'site+cu128' cannot name an AMI: the amazon-ebs build names it "
        "ktinfra-kt-site+cu128-<timestamp>, and EC2 takes an AMI name of 3 to 128 letters, digits, spaces "
        "and ( ) [ ] . / ' @ _ - only; it holds '+'. Copy the profile to a file whose name has none (such "
        "as 'site_cu128')"
    ), text
    assert not out.exists()


def test_make_image_for_amazon_ebs_is_refused_before_aws_or_packer(tmp_path, no_aws):
    # the arguments `make image IMAGE_SOURCE=amazon-ebs` passes (and --tag, which amazon-ebs ignores)
    site = _site_profile(tmp_path, "site+cu128")
    _, cmd = _make_n("image", "IMAGE_SOURCE=amazon-ebs", f"IMAGE_PROFILE={site}")
    out = tmp_path / "out"
    args = [*cmd[cmd.index("image") :], "--out", str(out), "--packer", "/nonexistent"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert result.output.startswith("error: profile 'site+cu128' cannot name an AMI"), result.output
    assert not out.exists()


def test_a_packer_whose_validate_passes_never_runs_for_an_ami_name_ec2_refuses(tmp_path, no_aws):
    # the refusal is ktinfra's own: a packer (version, plugin) that validated the name would not be reached
    calls = tmp_path / "packer-calls"
    packer = tmp_path / "packer"
    packer.write_text(f'#!/bin/sh\necho "$@" >> {calls}\necho "Packer v1.6.6"\nexit 0\n')
    packer.chmod(0o755)
    req = build.BuildRequest(
        source="amazon-ebs",
        profile=str(_site_profile(tmp_path, "site+cu128")),
        out_root=tmp_path / "out",
        packer=str(packer),
    )
    with pytest.raises(ImageError, match=r"profile 'site\+cu128' cannot name an AMI"):
        build.run(req)
    assert not calls.exists() and not (tmp_path / "out").exists()


def test_ami_name_length_limit_and_the_docker_source_keeps_plus(tmp_path, ec2, fake_docker):
    publish_ami("eu-north-1", "ami-000000000000000d1", DLAMI.format("20261001"), "2026-10-01T00:00:00")
    longest = "p" * (128 - len("ktinfra-kt--") - 10)
    req = build.BuildRequest(
        source="amazon-ebs", profile=str(_site_profile(tmp_path, longest)), region="eu-north-1"
    )
    prep = build.prepare(req, ec2=ec2)
    assert (prep.variables["aws_ami_name"], prep.variables["aws_ami_envs"]) == ("ktinfra-kt", "")
    assert len(build.ami_name(longest)) == 128
    req.profile = str(_site_profile(tmp_path, longest + "p"))
    with pytest.raises(
        ImageError, match="it would be 129 characters. Copy the profile to a file whose name is at most 106"
    ):
        build.prepare(req, ec2=ec2)
    # Before: an AMI of --env inference was named like the full image's (ktinfra-kt-<profile>-<timestamp>)
    partial = dataclasses.replace(req, envs=["inference"])
    with pytest.raises(ImageError, match="it would be 139 characters.* at most 96 characters"):
        build.prepare(partial, ec2=ec2)
    partial = dataclasses.replace(req, profile=str(_site_profile(tmp_path, "site")), envs=["sft"])
    assert build.prepare(partial, ec2=ec2).variables["aws_ami_envs"] == "-sft"
    # docker: the + stays a profile name (tag given; the build container's name maps it to _)
    site = _site_profile(tmp_path, "site+cu128")
    docker = build.BuildRequest(
        profile=str(site), tag="site-cu128", out_root=tmp_path / "o", wheelhouse=tmp_path / "w"
    )
    assert build.prepare(docker).variables["docker_container_name"].startswith("image-build-site_cu128-")


def test_template_names_the_ami_as_ktinfra_checks_it():
    text = (REPO_ROOT / "images" / "kt.pkr.hcl").read_text()
    assert re.search(
        r'^\s*ami_name\s*=\s*"\$\{var\.aws_ami_name\}-\$\{var\.profile\}\$\{var\.aws_ami_envs\}-\{\{timestamp\}\}"$',
        text,
        re.M,
    )


def test_make_image_deps_readies_docker_only_for_the_docker_source():
    """Before: `make image IMAGE_SOURCE=amazon-ebs` ran scripts/docker-ready.sh (docker, base image)."""

    def commands(*args: str) -> str:
        proc = subprocess.run(
            ["make", "-n", "--no-print-directory", "-C", str(REPO_ROOT), "image-deps", *args],
            capture_output=True,
            text=True,
            check=True,
        )
        return proc.stdout

    if not shutil.which("make"):
        pytest.skip("no make")
    assert "scripts/docker-ready.sh" not in commands("IMAGE_SOURCE=amazon-ebs")
    assert "bash scripts/docker-ready.sh" in commands()
    assert "bash scripts/docker-ready.sh" in commands("IMAGE_SOURCE=docker")


def test_cleanup_removes_ansible_state_and_python_history_of_every_home():
    """Before: only /root/.ansible and /root/.python_history; an AMI's play runs as ubuntu. (The docker
    test tests/integration/image/test_cleanup.py runs the script; this machine must not.)"""
    script = REPO_ROOT / "images" / "scripts" / "cleanup.sh"
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0
    removed = set()
    for line in script.read_text().replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["rm"]:
            removed |= {w for w in words[1:] if not w.startswith("-")}
    assert {
        "/root/.ansible",
        "/home/*/.ansible",
        "/root/.python_history",
        "/home/*/.python_history",
    } <= removed


def _stage(tmp_path: Path, name: str = "kt-0.7-docker") -> Path:
    stage = tmp_path / f"{name}.partial"
    stage.mkdir()
    (stage / "build.log").write_text("new build\n")
    return stage


def _old_build(tmp_path: Path, name: str = "kt-0.7-docker") -> Path:
    final = tmp_path / name
    (final / "sub").mkdir(parents=True)
    (final / "manifest.json").write_text('{"old": true}\n')
    (final / "sub" / "kept").write_text("x")
    return final


def test_publish_replaces_the_previous_build_with_its_manifest(tmp_path):
    stage, final = _stage(tmp_path), _old_build(tmp_path)
    build.publish(stage, final, '{"new": true}\n')
    assert json.loads((final / "manifest.json").read_text()) == {"new": True}
    assert (final / "build.log").read_text() == "new build\n" and not (final / "sub").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kt-0.7-docker"]  # no stage, no old copy left


def _immutable(path: Path) -> None:
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip(f"chattr +i is not supported on the filesystem of {path}")


def test_publish_that_cannot_move_the_previous_build_keeps_both_whole(tmp_path):
    """Before: rmtree(final, ignore_errors=True) then os.replace: a previous build with files the user cannot
    delete (root-owned after `sudo make image`; here immutable) lost its manifest, the replace failed with a
    traceback ('Directory not empty') and the new build's manifest was never written."""
    stage, final = _stage(tmp_path), _old_build(tmp_path)
    _immutable(final)
    try:
        with pytest.raises(OSError):
            build.publish(stage, final, '{"new": true}\n')
    finally:
        subprocess.run(["chattr", "-i", str(final)], check=True)
    assert json.loads((final / "manifest.json").read_text()) == {"old": True}
    assert (final / "sub" / "kept").exists()
    assert json.loads((stage / "manifest.json").read_text()) == {"new": True}  # the new one is kept whole


def test_publish_puts_the_previous_build_back_when_the_new_one_cannot_take_its_place(tmp_path, monkeypatch):
    """The stage's own rename failing (EXDEV, say: an --out the stage was not made beside) is simulated; the
    previous build must come back from where it was moved aside."""
    stage, final = _stage(tmp_path), _old_build(tmp_path)
    real_replace = os.replace

    def replace(src, dst):
        if Path(src) == stage:
            raise OSError(18, "Invalid cross-device link")
        return real_replace(src, dst)

    monkeypatch.setattr(build.os, "replace", replace)
    with pytest.raises(OSError):
        build.publish(stage, final, '{"new": true}\n')
    assert json.loads((final / "manifest.json").read_text()) == {"old": True}
    assert (final / "sub" / "kept").exists() and not list(tmp_path.glob(".kt-0.7-docker.old-*"))
    assert json.loads((stage / "manifest.json").read_text()) == {"new": True}


def test_a_file_named_like_a_shipped_profile_in_the_working_directory_is_not_taken_for_it(
    tmp_path, monkeypatch, fake_docker
):
    """Before: profile_ref checked Path(name).is_file(): with a file `kt-0.7` in the working directory the
    image play was told to use /cwd/kt-0.7 (no .yaml: the role takes it for a shipped name) and failed after
    the container had started, while the build itself loaded the shipped profile."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kt-0.7").write_text("not a profile\n")
    prep = build.prepare(build.BuildRequest(source="docker", profile="kt-0.7", out_root=tmp_path / "out"))
    assert build.profile_ref(prep) == "kt-0.7"
    site = tmp_path / "site.yaml"
    shutil.copy(SMOKE, site)
    prep = build.prepare(build.BuildRequest(source="docker", profile="site.yaml", out_root=tmp_path / "out"))
    assert build.profile_ref(prep) == str(site)


def test_a_source_ami_that_cannot_boot_the_build_is_refused_before_packer(ec2):
    """Before: describe_ami only checked that the AMI existed: an arm64 AMI was accepted for an x86_64 AMX
    instance (the launch fails, or a paid instance waits out the SSH timeout)."""
    publish_ami(
        "eu-north-1", "ami-0000000000000a64e", DLAMI.format("20261001"), "2026-10-01T00:00:00", arch="arm64"
    )
    args = {"source": "amazon-ebs", "profile": SMOKE, "region": "eu-north-1"}
    with pytest.raises(ImageError, match=r"--source-ami ami-0000000000000a64e \(.*\) is arm64"):
        build.prepare(build.BuildRequest(**args, source_ami="ami-0000000000000a64e"), ec2=ec2)
    publish_ami("eu-north-1", "ami-000000000000000d1", DLAMI.format("20261001"), "2026-10-01T00:00:00")
    prep = build.prepare(build.BuildRequest(**args, source_ami="ami-000000000000000d1"), ec2=ec2)
    # the launch mapping sizes the AMI's own root device (moto's default, as Ubuntu AMIs have it)
    assert prep.variables["aws_root_device_name"] == "/dev/sda1"
    assert prep.variables["aws_ssh_username"] == "ubuntu"
    prep = build.prepare(
        build.BuildRequest(**args, source_ami="ami-000000000000000d1", ssh_username="admin"), ec2=ec2
    )
    assert prep.variables["aws_ssh_username"] == "admin"
    with pytest.raises(ImageError, match="--ssh-username 'bad user' is not a user name"):
        build.prepare(build.BuildRequest(**args, ssh_username="bad user"), ec2=ec2)


def test_the_template_sizes_the_root_device_ktinfra_read_from_the_ami():
    template = (REPO_ROOT / "images" / "kt.pkr.hcl").read_text()
    assert "device_name           = var.aws_root_device_name" in template
    assert "/dev/sda1" not in template.split('variable "aws_root_device_name"', 1)[1].split("source ", 1)[1]


def test_a_previous_build_that_cannot_be_removed_is_reported_and_listed_no_more(tmp_path, monkeypatch):
    """publish() renames the previous build aside; a file in it the user cannot delete (here immutable) kept
    .NAME.old-* with its manifest, which `image list` and verify's manifest search (glob */manifest.json)
    then took for another build."""
    from ktinfra.image import listing, verify

    stage, final = _stage(tmp_path), _old_build(tmp_path)
    _immutable(final / "manifest.json")
    left = None
    try:
        left = build.publish(stage, final, json.dumps({"new": True}) + "\n")
        assert left is not None and left.name.startswith(".kt-0.7-docker.old-")
        assert (left / "manifest.json").exists()
        assert json.loads((final / "manifest.json").read_text()) == {"new": True}
        monkeypatch.setattr(listing.shutil, "which", lambda _name: None)  # the manifests' rows only
        assert [row["manifest"] for row in listing.builds(tmp_path)] == [str(final / "manifest.json")]
        assert verify.find_manifest("sha256:none", tmp_path) is None
    finally:
        subprocess.run(["chattr", "-i", str((left or final) / "manifest.json")], check=False)


@pytest.mark.parametrize(
    ("envs", "name"),
    [
        ([], "kt-0.7-docker"),
        (["inference"], "kt-0.7-inference-docker"),
        (["sft", "inference"], "kt-0.7-docker"),
    ],
)
def test_a_partial_image_gets_its_own_tag_and_build_folder(envs, name):
    """Before: `--env inference` took the full image's tag ktinfra/kt:kt-0.7 and replaced its build folder."""
    args = ["image", "build", "--check", *(a for env in envs for a in ("--env", env))]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0 and result.output.strip() == f"input ok: build {name}", result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--source-ami", "bogus"], "error: --source-ami 'bogus' is not an AMI id"),
        (["--source-ami", "ami-0123456789ABCDEF0"], "is not an AMI id"),
        (["--source-ami", "ami-0123"], "is not an AMI id"),
        (["--region", "eu west 1"], "error: --region 'eu west 1' is not an AWS region name"),
        (["--region", "eu-west-1a"], "is not an AWS region name"),  # a zone, not a region
        (["--region", ""], "is not an AWS region name"),
    ],
)
def test_malformed_region_or_source_ami_is_refused_by_the_check(tmp_path, monkeypatch, args, message):
    """Before: `image build --check` (what make image runs before image-deps installs packer) said "input ok"
    for them, and they were refused only later by AWS, or by boto3 as a failed request."""

    def asked(*_args, **_kwargs):
        raise AssertionError("AWS was asked")

    monkeypatch.setattr(build.aws, "ec2_client", asked)
    out = tmp_path / "out"
    base = ["image", "build", "--source", "amazon-ebs", "--profile", SMOKE, "--out", str(out), "--check"]
    result = CliRunner().invoke(app, [*base, *args])
    assert result.exit_code == 1 and message in result.output, result.output
    result = CliRunner().invoke(app, [*base, "--packer", "/nonexistent", *args])  # a build: the same refusal
    assert result.exit_code == 1 and message in result.output, result.output
    assert not out.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--region", "us-gov-west-1", "--source-ami", "ami-0123abcd"],
        ["--region", "cn-northwest-1", "--source-ami", "ami-0123456789abcdef0"],
        ["--region", "eu-isoe-west-1"],
    ],
)
def test_region_and_source_ami_names_ec2_takes_pass_the_check(tmp_path, args):
    base = ["image", "build", "--source", "amazon-ebs", "--profile", SMOKE, "--out", str(tmp_path), "--check"]
    result = CliRunner().invoke(app, [*base, *args])
    assert result.exit_code == 0 and "input ok: build smoke-amazon-ebs" in result.output, result.output
