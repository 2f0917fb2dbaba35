"""Stack profile -> per-env build specs; the manifest assembly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ktinfra.image import ImageError, manifest, spec

GB = 10**9

SMOKE = Path(__file__).parents[1] / "integration" / "image" / "smoke-profile.yaml"
BASE = 'name: p\ngeneration: current\npython: "3.11"\n'  # a profile file's head, for the envs below


def test_named_profile_gives_both_envs_with_pins():
    envs = spec.env_specs(spec.load("kt-0.7"))
    assert set(envs) == {"kt-kernel", "kt-sft"}
    assert "kt-kernel==0.7.2" in envs["kt-kernel"]["pins"]
    assert envs["kt-kernel"]["python"] == "/opt/kt/envs/kt-kernel/bin/python"


def test_profile_file_and_env_subset():
    profile = spec.load(str(SMOKE))
    assert profile["name"] == "smoke"
    assert list(spec.env_specs(profile, only=["sft"])) == ["kt-sft"]
    assert list(spec.env_specs(profile, only=["kt-kernel"])) == ["kt-kernel"]
    assert spec.root_volume_gb(profile, spec.env_specs(profile)) == 30


def test_volume_from_env_sizes_or_default():
    profile = {
        "name": "p",
        "envs": {
            "inference": {"name": "a", "packages": ["x==1"], "disk_bytes": 14 * GB, "download_bytes": 6 * GB},
            "sft": {"name": "b", "packages": ["y==1"]},
        },
    }
    envs = spec.env_specs(profile)
    # 40 GB base + (14 + 6 GB sized env + 25 GB for the unsized one) * 1.25 headroom, rounded up
    assert spec.root_volume_gb(profile, envs) == 40 + 57
    assert spec.root_volume_gb(profile, spec.env_specs(profile, only=["inference"])) == 40 + 25
    profile["envs"]["inference"]["disk_bytes"] = 14e9  # a profile load_profile refuses: named, as ImageError
    with pytest.raises(ImageError, match="envs.inference.disk_bytes must be a whole number of bytes"):
        spec.root_volume_gb(profile, envs)


def test_unknown_profile_and_env_refused(tmp_path):
    with pytest.raises(ImageError, match="unknown stack profile 'kt-9'"):
        spec.load("kt-9")
    with pytest.raises(ImageError, match="no env of profile kt-0.7 matches"):
        spec.env_specs(spec.load("kt-0.7"), only=["training"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\n")
    with pytest.raises(ImageError, match="must set name and generation"):
        spec.load(str(bad))


def test_wheel_files_and_git_sources_become_pins():
    env = {
        "packages": ["torch==2.7.1"],
        "wheels": [
            {
                "name": "flash-attn",
                "file": "flash_attn-2.8.3+cu12torch2.7cxx11abiTRUE-cp311-cp311-linux_x86_64.whl",
            },
            {"file": "ktransformers-0.4.2+cu128torch27fancy-cp311-cp311-linux_x86_64.whl"},
        ],
        "git": [{"name": "llamafactory", "repo": "https://example.invalid/LLaMA-Factory.git"}],
    }
    assert spec.env_pins(env) == [
        "torch==2.7.1",
        "flash-attn==2.8.3+cu12torch2.7cxx11abiTRUE",
        "ktransformers==0.4.2+cu128torch27fancy",
        "llamafactory",
    ]


def test_profile_without_pins_refused(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text(BASE + "envs:\n  inference:\n    name: kt\n    packages: []\n")
    with pytest.raises(ImageError, match="pins no packages"):
        spec.env_specs(spec.load(str(empty)))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- name: p\n- generation: current\n", "must set name and generation"),  # a YAML list
        (BASE + "envs: [a, b]\n", "envs must map env keys"),
        (
            BASE + "envs:\n  inference:\n    name: kt\n    wheels:\n      - name: kt-kernel\n",
            "each of envs.inference.wheels must be a mapping with name, file",
        ),
        (BASE + "envs: {inference: [\n", "is not valid YAML"),
        (BASE, "profile .* has no envs: nothing to bake"),
    ],
)
def test_malformed_profile_file_refused(tmp_path, text, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(ImageError, match=message):
        spec.load(str(bad))


def test_wheel_file_without_version_refused():
    env = {"wheels": [{"name": "kt-kernel", "file": "kt_kernel.whl"}]}
    with pytest.raises(ImageError, match="wheel kt-kernel: 'kt_kernel.whl' is not a wheel file name"):
        spec.env_pins(env)


def test_manifest_lists_pins_with_sha_and_sizes(tmp_path):
    packages = {
        "envs": {
            "kt-kernel": {
                "python": "/p/bin/python",
                "python_version": "3.11.2",
                "prefix": "/p",
                "size_bytes": 10,
                "imports": {"numpy": "ok"},
                "packages": [
                    {
                        "name": "numpy",
                        "version": "2.1.3",
                        "pinned": True,
                        "wheel": "numpy.whl",
                        "sha256": "ab",
                    },
                    {"name": "pip", "version": "23.0", "pinned": False, "wheel": None, "sha256": None},
                ],
            }
        }
    }
    m = manifest.build_manifest(
        image={"source": "docker", "id": "sha256:1"},
        profile=spec.load(str(SMOKE)),
        profile_ref=str(SMOKE),
        packages=packages,
        sizes={"image_bytes": 5},
        started="2026-11-21T00:00:00+00:00",
        duration_s=12.34,
        packer_version="1.6.6",
        roles={"kt-kernel": "inference"},
    )
    assert m["envs"]["kt-kernel"]["role"] == "inference"  # verify picks --kt-python by role, not by name
    assert m["pins"] == [
        {"env": "kt-kernel", "name": "numpy", "version": "2.1.3", "wheel": "numpy.whl", "sha256": "ab"}
    ]
    assert m["sizes"] == {"image_bytes": 5, "envs_bytes": {"kt-kernel": 10}}
    assert m["build"]["duration_s"] == 12.3
    assert len(m["build"]["git"]["revision"]) == 40
    assert json.loads(json.dumps(m)) == m


def test_manifest_keeps_the_pins_whose_imports_were_not_checked():
    env = {
        "python": "/p/bin/python",
        "python_version": "3.11.2",
        "prefix": "/p",
        "size_bytes": 10,
        "imports": {},
        "packages": [{"name": "metapkg", "version": "1", "pinned": True, "wheel": None, "sha256": None}],
    }
    args = {
        "image": {"source": "docker", "id": "sha256:1"},
        "profile": spec.load(str(SMOKE)),
        "profile_ref": str(SMOKE),
        "sizes": {},
        "started": "2026-11-21T00:00:00+00:00",
        "duration_s": 1.0,
        "packer_version": "1.6.6",
        "git": {"revision": None, "dirty": None},
    }
    why = {"metapkg": "no top_level.txt, and its RECORD lists no importable module"}
    m = manifest.build_manifest(packages={"envs": {"e": {**env, "not_checked": why}}}, **args)
    assert m["envs"]["e"]["not_checked"] == why
    # a packages.json from before validate.py reported them: unknown (null), not "none unchecked" ({})
    m = manifest.build_manifest(packages={"envs": {"e": env}}, **args)
    assert m["envs"]["e"]["not_checked"] is None


def test_packer_artifact_takes_last_run(tmp_path):
    pm = tmp_path / "packer-manifest.json"
    pm.write_text(
        json.dumps(
            {
                "last_run_uuid": "b",
                "builds": [
                    {"packer_run_uuid": "a", "builder_type": "docker", "artifact_id": "sha256:old"},
                    {
                        "packer_run_uuid": "b",
                        "builder_type": "amazon-ebs",
                        "artifact_id": "eu-west-1:ami-123",
                    },
                ],
            }
        )
    )
    assert manifest.packer_artifact(pm) == {"builder": "amazon-ebs", "artifact_id": "eu-west-1:ami-123"}


@pytest.mark.parametrize("name", ["bad.json", "site.profile"])
def test_a_profile_file_without_a_yaml_suffix_is_named_as_a_file(tmp_path, monkeypatch, name):
    """Before: an existing bad.json was 'unknown stack profile 'bad.json'', as if it were a typo'd name."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text("{}")
    for given in (name, str(tmp_path / name)):
        with pytest.raises(ImageError, match=f"stack profile file {given}: a profile file must end in .yaml"):
            spec.load(given)
    with pytest.raises(ImageError, match="unknown stack profile 'kt-9'"):
        spec.load("kt-9")  # no such file: still a profile name
