"""The image's root volume counts the wheels two baked envs share once, as the install does.

kt_python_env fills one wheelhouse with `pip wheel --find-links`: the second env takes torch and its CUDA
wheels from what the first downloaded (profile envs.X.download_shared_bytes). Before, the root volume added
both envs' downloads in full."""

from __future__ import annotations

import math

from ktinfra.image import spec
from ktinfra.profiles import env_spec, load_profile

GB = 10**9


def _profile(shared: dict | None) -> dict:
    sft = {"name": "b", "packages": ["y==1"], "disk_bytes": 9 * GB, "download_bytes": 5 * GB}
    if shared is not None:
        sft["download_shared_bytes"] = shared
    return {
        "name": "p",
        "envs": {
            "inference": {"name": "a", "packages": ["x==1"], "disk_bytes": 10 * GB, "download_bytes": 6 * GB},
            "sft": sft,
        },
    }


def test_two_envs_sharing_wheels_count_them_once():
    profile = _profile({"inference": 4 * GB})
    assert spec.root_volume_gb(profile, spec.env_specs(profile)) == 40 + math.ceil(1.25 * (10 + 6 + 9 + 1))


def test_one_env_alone_downloads_all_of_its_wheels():
    profile = _profile({"inference": 4 * GB})
    only_sft = spec.env_specs(profile, only=["sft"])
    assert spec.root_volume_gb(profile, only_sft) == 40 + math.ceil(1.25 * (9 + 5))


def test_without_a_share_both_downloads_count():
    profile = _profile(None)
    assert spec.root_volume_gb(profile, spec.env_specs(profile)) == 40 + math.ceil(1.25 * (10 + 6 + 9 + 5))


def test_kt_07_both_envs():
    profile = load_profile("kt-0.7")
    inference, sft = env_spec(profile, "inference"), env_spec(profile, "sft")
    total = sum(e["disk_bytes"] + e["download_bytes"] for e in (inference, sft))
    total -= sft["download_shared_bytes"]["inference"]
    assert spec.root_volume_gb(profile, spec.env_specs(profile)) == 40 + math.ceil(1.25 * total / GB)
