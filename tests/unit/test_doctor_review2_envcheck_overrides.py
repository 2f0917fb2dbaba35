"""A wheel override by URL whose path is not the whole story: a presigned URL (S3, a mirror's token) ends in
?X-Amz-Signature=..., a GitHub asset URL may write the local version's '+' as %2B. The wheel's file name was
read from the whole URL: the override was refused ('...whl?X-Amz-Signature=SECRET is not a wheel file name',
the signature printed) or kept under a name pip cannot read. Now the file is the URL path's last part,
%-decoded; the URL itself is downloaded as given."""

from __future__ import annotations

import json
import subprocess
import sys

from ktinfra import envcheck
from ktinfra.profiles import load_profile

SHA = "ab" * 32
NAME = "flash_attn-2.8.3+cu12torch2.7cxx11abiTRUE-cp311-cp311-linux_x86_64.whl"


def _flash_attn(plan: dict) -> dict:
    return next(w for env in plan["envs"] for w in env["wheels"] if w["name"] == "flash-attn")


def test_a_presigned_url_with_an_encoded_plus_is_taken_as_its_wheel(tmp_path):
    url = f"https://bucket.example/{NAME.replace('+', '%2B')}?X-Amz-Signature=SIGSECRET&X-Amz-Expires=600"
    name, override = envcheck.parse_wheel_override(f"flash-attn={url}#sha256={SHA}")
    plan = envcheck.check_install(
        load_profile("kt-0.4-autodl"), ["sft"], root=tmp_path / "envs", wheelhouse=tmp_path / "wh",
        manager="conda", wheel_overrides={name: override},
    )  # fmt: skip
    wheel = _flash_attn(plan)
    assert wheel["url"] == url  # fetched as given, signature and all
    assert wheel["file"] == NAME and wheel["version"] == "2.8.3", wheel
    assert wheel["wheelhouse_file"] == "flash_attn-2.8.3-cp311-cp311-linux_x86_64.whl"


def test_profile_check_takes_the_presigned_url(tmp_path):
    url = f"https://bucket.example/{NAME}?X-Amz-Signature=SIGSECRET"
    done = subprocess.run(
        [sys.executable, "-m", "ktinfra", "profile", "check", "kt-0.4-autodl", "--json", "--env", "sft",
         "--root", str(tmp_path / "envs"), "--wheelhouse", str(tmp_path / "wh"), "--manager", "conda",
         "--wheel", f"flash-attn={url}#sha256={SHA}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode in (0, 2), done.stderr  # 2: problems (no conda here, ktransformers' sha256)
    assert "SIGSECRET" not in done.stderr
    wheel = _flash_attn(json.loads(done.stdout))
    assert (wheel["file"], wheel["url"]) == (NAME, url)
