"""kt_python_env under ansible-playbook -vvv --diff, run for real on localhost: the files it writes that may
hold a profile's URLs with their tokens (the staged and the installed site profile, an env's requirements and
freeze) show no diff. -vvv prints a result's diff whole, changed or not, as ansible-runner's events (kept by
ktinfra provision) hold it; at the default verbosity a changed file's diff is printed."""

from __future__ import annotations

import pytest
import yaml
from role_play import run_play
from test_kt_python_env_site_profile import PROFILE, VALIDATE, installed
from test_kt_python_env_site_profile import _setup as _site_setup

TOKEN = "t0ken-in-a-url"
HOST = "files.example"


def _site_profile(more: str = "") -> str:
    """A site profile whose wheel file URL carries a user:token@ and a ?token=, and `more` YAML lines."""
    url = f"https://ci:{TOKEN}@{HOST}/probe-1.0.0-py3-none-any.whl?token={TOKEN}"
    wheels = [{"name": "probe", "file": "probe-1.0.0-py3-none-any.whl", "url": url, "sha256": "ab" * 32}]
    env = PROFILE["envs"]["inference"] | {"wheels": wheels}
    return yaml.safe_dump(PROFILE | {"envs": {"inference": env}}) + more


def test_the_site_profiles_tokens_are_not_in_the_diff(tmp_path):
    """A new site profile (staged, checked, installed), a changed one, and a --check of another change.
    Before: the staging copy's diff (profile_stage.yml) held the whole file, the wheel URL's token in it."""
    for more, flags in [("", []), ("description: changed\n", []), ("description: checked\n", ["--check"])]:
        (tmp_path / "site.yaml").write_text(_site_profile(more))
        env = {"TMPDIR": str(tmp_path / "scratch")}
        rc, output = run_play(
            tmp_path, VALIDATE, _site_setup(tmp_path), env=env, flags=["-vvv", "--diff", *flags]
        )
        assert rc == 0, output[-3000:]
        assert TOKEN not in output, output[-3000:]
    assert installed(tmp_path) == ["site.yaml"]
    assert "description: changed" in (tmp_path / "tool" / "profiles" / "site.yaml").read_text()


# slow: the same requirements template (diff: false) written under --diff with a `name @ URL?token=` in
# test_the_freezes_urls_are_not_in_the_diff
@pytest.mark.slow
def test_the_requirements_files_urls_are_not_in_the_diff(tmp_path):
    """env.yml under --check --diff with a package given by URL (name @ URL?token=) and a git source whose
    URL carries user:token@: the pinned requirements file holds both. Before: its template's diff printed
    them."""
    from test_kt_python_env_rerun import _setup as _env_setup
    from test_kt_python_env_review_conda_patches import ENV

    extra = _env_setup(tmp_path, f"probe @ https://{HOST}/probe-1.0.0-py3-none-any.whl?token={TOKEN}")
    git = {"name": "probe-src", "repo": f"https://ci:{TOKEN}@{HOST}/probe.git", "ref": "v1", "subdir": "",
           "editable": False, "extras": []}  # fmt: skip
    extra["kt_python_env_spec"]["git"] = [git]
    rc, output = run_play(tmp_path, ENV, extra, flags=["-vvv", "--check", "--diff"])
    assert rc == 0, output[-3000:]
    assert "ktinfra-requirements.txt" in output and TOKEN not in output, output[-3000:]


def test_the_freezes_urls_are_not_in_the_diff(tmp_path):
    """A real install of a package given by URL with ?token= (pip freeze keeps the query; it drops a
    user:token@), then the freeze is kept next to the env, with --diff. Before: the new freeze file's diff
    printed the URL, token and all."""
    from local_pypi import PACKAGE, make_wheel, serve_index
    from test_kt_python_env_rerun import _setup as _env_setup
    from test_kt_python_env_review_conda_patches import ENV

    wheel = make_wheel(tmp_path / "files")
    server = serve_index(tmp_path / "files")
    try:
        pin = f"{PACKAGE} @ http://127.0.0.1:{server.port}/files/{wheel.name}?token={TOKEN}"
        extra = _env_setup(tmp_path, pin)
        rc, output = run_play(tmp_path, ENV, extra, env={"PIP_CONFIG_FILE": "/dev/null"}, flags=["--diff"])
    finally:
        server.close()
    freeze = (tmp_path / "env" / "ktinfra-freeze.txt").read_text()
    assert rc == 0 and f"?token={TOKEN}" in freeze, output[-3000:]
    assert TOKEN not in output, output[-3000:]
