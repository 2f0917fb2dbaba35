"""Two envs installed in one run download their common wheels once: kt_python_env fills the shared wheelhouse
with `pip wheel --find-links <wheelhouse>` (roles/kt_python_env/tasks/pip.yml), so the second env takes torch
and its CUDA wheels from what the first downloaded. The install check added each missing env's
download_bytes in full: kt-0.7's inference (6 GB) and sft (5 GB) envs, which pip resolves to 88 of the same
wheel files (4.51 GB of 5.09 and 4.77 GB; 5.35 GB together, the 5.37 GB wheelhouse roles1 measured), made
an 11 GB wheelhouse need and a false 'disk too small' on a data disk with 8 GB free. A profile now says
how much two envs share (envs.sft.download_shared_bytes) and the second env's download is less by it."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from installed_env import record_install

from ktinfra import envcheck, profiles

GB = 10**9


def _wheelhouse_need(tmp_path: Path, profile: dict, keys: list[str]) -> int:
    result = envcheck.check_install(
        profile, keys, root=tmp_path / "envs", wheelhouse=tmp_path / "wh", manager="venv"
    )
    (disk,) = result["disks"]  # envs and wheelhouse on one disk here: the wheelhouse is what is left
    return disk["need_bytes"] - sum(env["disk_bytes"] for env in result["envs"])


# of kt-0.7's sft download, the wheels its inference env downloads too: pip 26.3 resolved both envs for
# cp311 manylinux_2_35_x86_64 (2026-12-01): 88 of the same files, 4.51 GB
KT_07_SHARED = 4_500_000_000


def test_the_kt_07_envs_installed_together_download_torch_once(tmp_path):
    profile = profiles.load_profile("kt-0.7")
    profile["envs"]["sft"]["download_shared_bytes"] = {"inference": KT_07_SHARED}
    both = _wheelhouse_need(tmp_path, profile, ["inference", "sft"])
    assert both == 6 * GB + 5 * GB - KT_07_SHARED
    assert 5_370_000_000 <= both < 11 * GB  # no less than the measured wheelhouse of both (roles1)
    assert _wheelhouse_need(tmp_path, profile, ["sft"]) == 5 * GB  # alone, it downloads all of it
    assert _wheelhouse_need(tmp_path, profile, ["sft", "inference"]) == both  # either order


def _envs(shared: dict | None, a: int = 10 * GB, b: int = 8 * GB) -> dict:
    return {
        "name": "site",
        "generation": "current",
        "python": ["3.11"],
        "envs": {
            "inference": {"name": "inf", "packages": ["torch==2.9.1"], "download_bytes": a},
            "sft": {
                "name": "sft",
                "packages": ["torch==2.9.1"],
                "download_bytes": b,
                **({"download_shared_bytes": shared} if shared is not None else {}),
            },
        },
    }


def _torch_wheel(wheelhouse: Path, size: int) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("torch-2.9.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: torch\n\n")
    data = buffer.getvalue()
    with (wheelhouse / "torch-2.9.1-py3-none-any.whl").open("wb") as handle:
        handle.truncate(size - len(data))  # a hole: no disk used
        handle.seek(0, 2)
        handle.write(data)


def test_a_wheel_in_the_wheelhouse_and_the_share_are_not_taken_off_twice(tmp_path):
    """torch, in both envs' downloads and already in the wheelhouse: the second env's copy is the share,
    the first env's is the wheelhouse credit; the rest of both is downloaded."""
    (tmp_path / "wh").mkdir()
    _torch_wheel(tmp_path / "wh", 3 * GB)
    assert _wheelhouse_need(tmp_path, _envs({"inference": 4 * GB}), ["inference", "sft"]) == 11 * GB
    assert _wheelhouse_need(tmp_path, _envs(None), ["inference", "sft"]) == 15 * GB  # nothing said: all
    assert _wheelhouse_need(tmp_path, _envs({"inference": 4 * GB}), ["sft"]) == 5 * GB


def test_a_share_is_never_more_than_either_download(tmp_path):
    need = _wheelhouse_need(tmp_path, _envs({"inference": 9 * GB}, a=2 * GB), ["inference", "sft"])
    assert need == 2 * GB + 8 * GB - 2 * GB


def test_an_installed_env_shares_nothing_with_this_download(tmp_path):
    """Its wheels may be gone from the wheelhouse: only what is there is credited."""
    record_install(tmp_path / "envs" / "inf", _envs({"inference": 4 * GB}), "inference")
    assert _wheelhouse_need(tmp_path, _envs({"inference": 4 * GB}), ["inference", "sft"]) == 8 * GB


def _site_profile(tmp_path: Path, shared: object) -> Path:
    """kt-0.7 as a site profile file whose sft env (the file's last) says `shared`."""
    text = (profiles.PROFILE_DIR / "kt-0.7.yaml").read_text()
    shipped = "    download_shared_bytes: {inference: 4500000000}\n"
    assert text.endswith(shipped)  # the sft env's last line
    text = text.removesuffix(shipped)
    site = tmp_path / "site.yaml"
    site.write_text(f"{text}    download_shared_bytes: {shared}\n")
    return site


def test_a_share_in_a_profile_file_is_read(tmp_path):
    profile = profiles.load_profile(str(_site_profile(tmp_path, "{inference: 4500000000}")))
    assert profiles.env_spec(profile, "sft")["download_shared_bytes"] == {"inference": KT_07_SHARED}
    assert profiles.env_spec(profiles.load_profile("kt-0.7"), "sft")["download_shared_bytes"] == {
        "inference": KT_07_SHARED
    }
    assert profiles.env_spec(profile, "inference")["download_shared_bytes"] == {}


@pytest.mark.parametrize(
    ("shared", "message"),
    [
        ("{inference: -1}", "envs.sft.download_shared_bytes must map other env keys to whole numbers"),
        ("{inference: true}", "envs.sft.download_shared_bytes must map other env keys to whole numbers"),
        ("[4]", "envs.sft.download_shared_bytes must map other env keys to whole numbers"),
        ("{infrence: 4}", "envs.sft.download_shared_bytes names infrence, not another env of this profile"),
        ("{sft: 4}", "envs.sft.download_shared_bytes names sft, not another env of this profile"),
    ],
)
def test_a_bad_share_in_a_profile_file_is_refused(tmp_path, shared, message):
    with pytest.raises(profiles.UnknownProfileError, match=message):
        profiles.load_profile(str(_site_profile(tmp_path, shared)))
