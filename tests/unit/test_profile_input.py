"""Odd input to stack profiles and `ktinfra profile`: values of the wrong type (NaN, YAML dates, numbers
where a string is read, non-string keys), deep nesting and expanding YAML aliases in a site's profile, and
--wheels-json overrides of the wrong shape. Each is refused with one `error:` line (exit 1) naming the key,
never a traceback, and what is printed as JSON is strict JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra import doctor, envcheck, profiles
from ktinfra.cli import app
from ktinfra.image import ImageError, spec

runner = CliRunner()
HEAD = 'name: site\ngeneration: current\npython: "3.11"\n'
ENV = "envs:\n  inference:\n    name: kt\n    packages: [a==1]\n"
DEEP_YAML = "a: " + "[" * 5000 + "]" * 5000 + "\n"
# ten levels of ten aliases each: 10**11 values once expanded, a few hundred bytes of YAML
LAUGHS = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 11)
)


def _strict(text: str):
    """json.loads that refuses NaN/Infinity, as any strict JSON reader does."""

    def refuse(constant):
        raise AssertionError(f"non-standard JSON constant {constant} in the output")

    return json.loads(text, parse_constant=refuse)


def _site(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(text)
    return path


def _check_argv(tmp_path: Path, profile: str, env: str = "inference") -> list[str]:
    root, wheelhouse = str(tmp_path / "envs"), str(tmp_path / "wh")
    return ["profile", "check", profile, "--env", env, "--root", root, "--wheelhouse", wheelhouse, "--json"]


def _refused(result, *words: str) -> str:
    """One `error:` line on stderr, nothing on stdout, exit 1, no traceback; the line holds `words`."""
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# values of the wrong type: refused by load_profile, naming the key


TYPED = {
    "nan upstream": ("upstream: .nan\n", "upstream must be a mapping with repo, ref, got nan"),
    "date of an unknown key": ("released: 2024-01-01\n", "released is the date 2024-01-01, a YAML timestamp"),
    "date as description": (
        "description: 2024-01-01\n",
        "description must be a string, got the date 2024-01-01",
    ),
    "nested datetime": (
        "notes: {built: 2024-01-01 10:00:00}\n",
        "notes.built is the date 2024-01-01T10:00:00",
    ),
    "infinity in a list": ("notes: [1, .inf]\n", "notes[1] is inf: profile numbers must be finite"),
    "binary": ("blob: !!binary aGVsbG8=\n", "blob is a YAML !!binary"),
    "set": ("tags: !!set {a, b}\n", "tags is a YAML !!set"),
    "omap": ("order: !!omap [a: 1]\n", "order[0] is a YAML !!omap/!!pairs entry"),
    "int key at the top": ("5: five\n", "key 5 in the top level must be a string"),
    "null key inside": ("notes: {~: x}\n", "key None in notes must be a string"),
    "glibc_min a float": ("glibc_min: 2.35\n", 'glibc_min must be a version string like "2.35", got 2.35'),
    "kernel_min a word": ('kernel_min: "new"\n', "kernel_min must be a version string"),
    "upstream.ref a number": ("upstream: {repo: r, ref: 7}\n", "upstream.ref must be a string, got 7"),
    "pip a list": ("pip: [x]\n", "pip must be a mapping with index_url"),
    "pip.extra_index_urls": (
        "pip: {extra_index_urls: [1]}\n",
        "pip.extra_index_urls must be a list of strings",
    ),
    "image.root_volume_gb": (
        'image: {root_volume_gb: "big"}\n',
        "image.root_volume_gb must be a whole number",
    ),
    "date that does not exist": ("released: 2024-02-30\n", "has a value that cannot be read"),
    "integer too long": ("count: " + "1" * 5000 + "\n", "has a value that cannot be read"),
}


@pytest.mark.parametrize("case", sorted(TYPED))
def test_a_top_level_value_of_the_wrong_type_is_one_error_naming_it(tmp_path, case):
    extra, message = TYPED[case]
    site = _site(tmp_path, HEAD + extra + ENV)
    with pytest.raises(profiles.UnknownProfileError, match="^profile file ") as caught:
        profiles.load_profile(str(site))
    assert message in str(caught.value)
    for argv in (["profile", "show", str(site), "--json"], _check_argv(tmp_path, str(site))):
        _refused(runner.invoke(app, argv), f"profile file {site}", message)


ENVS = {
    "wheel file a number": (
        "wheels: [{name: w, file: 123}]",
        "envs.inference.wheels[0].file must be a string, got 123",
    ),
    "wheel version a list": (
        'wheels: [{name: w, file: "w-1.0-py3-none-any.whl", version: [1]}]',
        'envs.inference.wheels[0].version must be a version like "2.8.3", got [1]',  # a wheel file name part
    ),
    "wheel url a list": (
        'wheels: [{name: w, file: "w-1.0-py3-none-any.whl", url: [x]}]',
        "envs.inference.wheels[0].url must be a string",
    ),
    "wheel sha256 not hex": (
        'wheels: [{name: w, file: "w-1.0-py3-none-any.whl", sha256: ABC}]',
        "envs.inference.wheels[0].sha256 must be 64 lowercase hex digits or null, got 'ABC'",
    ),
    "wheel name a number": (
        'wheels: [{name: 5, file: "w-1.0-py3-none-any.whl"}]',
        "wheels[0].name must be a string",
    ),
    "git ref a number": (
        "git: [{name: g, repo: r, ref: 1234}]",
        "envs.inference.git[0].ref must be a string, got 1234",
    ),
    "git editable a word": (
        'git: [{name: g, repo: r, editable: "yes"}]',
        "git[0].editable must be true or false",
    ),
    "git extras a string": (
        "git: [{name: g, repo: r, extras: torch}]",
        "git[0].extras must be a list of strings",
    ),
    "conda channel a number": (
        "conda_patches: [{channel: 5, packages: [a]}]",
        "envs.inference.conda_patches[0].channel must be a string",
    ),
    "conda packages a string": (
        "conda_patches: [{channel: c, packages: a}]",
        "conda_patches[0].packages must be a non-empty list of strings",
    ),
    "packages a mapping": ("packages: {a: 1}", "envs.inference.packages must be a list"),
    "env name a path": ("name: ../../etc", "envs.inference.name must be letters, digits and . _ + -"),
}


@pytest.mark.parametrize("case", sorted(ENVS))
def test_an_env_setting_of_the_wrong_type_is_one_error_naming_it(tmp_path, case):
    setting, message = ENVS[case]
    name = "" if setting.startswith("name:") else "    name: kt\n"
    site = _site(tmp_path, HEAD + "envs:\n  inference:\n" + name + "    " + setting + "\n")
    for argv in (["profile", "show", str(site), "--json"], _check_argv(tmp_path, str(site))):
        _refused(runner.invoke(app, argv), f"profile file {site}", message)


def test_an_env_key_that_is_not_a_string_is_refused(tmp_path):
    site = _site(tmp_path, HEAD + "envs:\n  1:\n    name: kt\n    packages: [a==1]\n")
    for argv in (["profile", "show", str(site), "--json"], _check_argv(tmp_path, str(site), env="1")):
        _refused(runner.invoke(app, argv), "env key 1 of envs must be a string such as inference, sft")


def test_two_envs_of_one_name_are_refused(tmp_path):
    """Before: accepted; both envs went to one directory, and the image build baked only the second
    (its env table is keyed by name) without a word."""
    site = _site(tmp_path, HEAD + "envs:\n  inference:\n    name: kt\n  sft:\n    name: kt\n")
    for argv in (["profile", "show", str(site), "--json"], _check_argv(tmp_path, str(site))):
        _refused(
            runner.invoke(app, argv),
            f"profile file {site}",
            "envs.inference and envs.sft are both named 'kt'",
        )


def test_a_profile_name_that_is_not_a_word_is_refused(tmp_path):
    site = _site(tmp_path, 'name: 5\ngeneration: current\npython: "3.11"\n')
    with pytest.raises(profiles.UnknownProfileError, match="name must be letters, digits"):
        profiles.load_profile(str(site))


def test_env_spec_checks_an_env_it_is_handed_directly():
    profile = {"name": "p", "envs": {"inference": {"name": "kt", "wheels": [{"name": "w", "file": 123}]}}}
    with pytest.raises(
        profiles.UnknownProfileError, match=r"envs.inference.wheels\[0\].file must be a string"
    ):
        profiles.env_spec(profile, "inference")
    with pytest.raises(profiles.UnknownProfileError, match="has no env 'sft'; it has: 1"):
        profiles.env_spec({"name": "p", "envs": {1: {"name": "kt"}}}, "sft")


# deep nesting, expanding or self-referring aliases, files that are not profiles


def test_a_deeply_nested_profile_is_its_profile_error_everywhere(tmp_path):
    site = _site(tmp_path, HEAD + DEEP_YAML)
    message = f"profile file {site} nests more than {profiles.MAX_DEPTH} levels deep"
    with pytest.raises(profiles.UnknownProfileError, match=message):
        profiles.load_profile(str(site))
    with pytest.raises(profiles.UnknownProfileError, match=message):
        doctor.validate(["local://"], "serve", str(site))
    with pytest.raises(ImageError, match=message):
        spec.load(str(site))
    for argv in (
        ["profile", "show", str(site)],
        _check_argv(tmp_path, str(site)),
        ["doctor", "--profile", str(site)],
    ):
        _refused(runner.invoke(app, argv), message)


@pytest.mark.parametrize(
    ("aliases", "message"),
    [
        ("x: &r [*r]\n", "nests more than 32 levels deep (YAML aliases?)"),
        ("x: &r {a: *r}\n", "nests more than 32 levels deep (YAML aliases?)"),
        (LAUGHS, "values (YAML aliases?)"),
    ],
    ids=["list-refers-to-itself", "mapping-refers-to-itself", "aliases-expand-to-10**11-values"],
)
def test_yaml_aliases_that_refer_to_themselves_or_expand_are_refused(tmp_path, aliases, message):
    site = _site(tmp_path, HEAD + aliases + ENV)
    _refused(runner.invoke(app, ["profile", "show", str(site), "--json"]), f"profile file {site}", message)


def test_files_that_are_not_profile_text_are_refused(tmp_path):
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe garbage")
    _refused(runner.invoke(app, ["profile", "show", str(binary)]), f"profile file {binary} cannot be read")
    big = _site(tmp_path, HEAD + "# " + "x" * profiles.MAX_PROFILE_BYTES + "\n")
    _refused(runner.invoke(app, ["profile", "show", str(big)]), f"profile file {big} is larger than")
    folder = tmp_path / "dir.yaml"
    folder.mkdir()
    _refused(
        runner.invoke(app, ["profile", "show", str(folder)]),
        f"stack profile file {folder} is not a regular file",
    )


# what is printed as JSON


def test_shown_and_checked_profiles_are_strict_json(tmp_path):
    for name in profiles.list_profiles():
        shown = runner.invoke(app, ["profile", "show", name, "--json"])
        assert shown.exit_code == 0, shown.output
        assert _strict(shown.stdout)["name"] == name
    assert [p["name"] for p in _strict(runner.invoke(app, ["profile", "list", "--json"]).stdout)]
    site = _site(tmp_path, HEAD + 'released: "2024-01-01"\nratio: 0.5\npip: {extra_index_urls: null}\n' + ENV)
    shown = _strict(runner.invoke(app, ["profile", "show", str(site), "--json"]).stdout)
    assert (shown["released"], shown["ratio"]) == ("2024-01-01", 0.5)
    checked = runner.invoke(app, _check_argv(tmp_path, str(site)))
    assert checked.exit_code in (0, 2), checked.output
    assert _strict(checked.stdout)["pip"] == {"index_url": None, "extra_index_urls": []}


# --wheels-json overrides


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"flash-attn": {"path": 5}},
            "wheel override flash-attn: path must be a non-empty string or null, got 5",
        ),
        (
            {"flash-attn": {"file": 5}},
            "wheel override flash-attn: file must be a non-empty string or null, got 5",
        ),
        (
            {"flash-attn": {"url": ["x"]}},
            'wheel override flash-attn: url must be a non-empty string or null, got ["x"]',
        ),
        (
            {"flash-attn": {"sha256": 5}},
            "wheel override flash-attn: sha256 must be a non-empty string or null",
        ),
        ({"flash-attn": {"path": ""}}, "wheel override flash-attn: path must be a non-empty string or null"),
        ({"flash-attn": {"path": {"a": 1}}}, "wheel override flash-attn: path must be a non-empty string"),
        ({"": {"path": "/x.whl"}}, "a wheel name must not be empty"),
    ],
)
def test_wheels_json_of_the_wrong_type_is_one_error(tmp_path, overrides, message):
    argv = [*_check_argv(tmp_path, "kt-0.4-autodl", env="sft"), "--wheels-json", json.dumps(overrides)]
    _refused(runner.invoke(app, argv), message)
    with pytest.raises(ValueError, match="wheel override"):
        envcheck.parse_wheels_json(json.dumps(overrides))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": ' * 20000 + "1" + "}" * 20000, "wheel overrides JSON nests too deeply"),
        ("[" * 20000 + "]" * 20000, "wheel overrides JSON nests too deeply"),
        ('{"flash-attn": {"path": NaN}}', "wheel overrides are not valid JSON: NaN is not a JSON value"),
        (
            '{"flash-attn": {"path": -Infinity}}',
            "wheel overrides are not valid JSON: -Infinity is not a JSON value",
        ),
        ("{x", "wheel overrides are not valid JSON: Expecting property name"),
        ('{"flash-attn": {"path": ' + "1" * 5000 + "}}", "wheel overrides are not valid JSON"),
    ],
    ids=["deep-objects", "deep-arrays", "nan", "infinity", "broken", "long-integer"],
)
def test_wheels_json_that_is_not_plain_json_is_one_error(tmp_path, text, message):
    argv = [*_check_argv(tmp_path, "kt-0.4-autodl", env="sft"), "--wheels-json", text]
    _refused(runner.invoke(app, argv), message)


def test_apply_overrides_checks_a_dict_handed_to_check_install(tmp_path):
    profile = profiles.load_profile("kt-0.4-autodl")
    with pytest.raises(
        ValueError, match="wheel override flash-attn: path must be a non-empty string or null"
    ):
        envcheck.check_install(
            profile,
            ["sft"],
            root=tmp_path,
            wheelhouse=tmp_path / "wh",
            wheel_overrides={"flash-attn": {"path": 5}},
        )


def test_a_well_typed_override_still_moves_the_wheel(tmp_path):
    wheel = "flash_attn-2.8.4-cp311-cp311-linux_x86_64.whl"
    overrides = envcheck.parse_wheels_json(
        json.dumps({"flash-attn": {"url": f"https://m/{wheel}", "sha256": "AB" * 32}})
    )
    assert overrides == {"flash-attn": {"url": f"https://m/{wheel}", "sha256": "ab" * 32}}
    result = envcheck.check_install(
        profiles.load_profile("kt-0.4-autodl"),
        ["sft"],
        root=tmp_path,
        wheelhouse=tmp_path / "wh",
        wheel_overrides=overrides,
    )
    moved = next(w for w in result["envs"][0]["wheels"] if w["name"] == "flash-attn")
    assert (moved["file"], moved["version"], moved["path"]) == (wheel, "2.8.4", None)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--env", "inference"],
            "--env inference given twice",
        ),  # its disk was counted twice: a false problem
        (
            [
                "--wheel",
                f"kt-kernel=/a.whl#sha256={'a' * 64}",
                "--wheel",
                f"kt-kernel=/b.whl#sha256={'b' * 64}",
            ],
            "--wheel kt-kernel given twice",  # the first was dropped without a word
        ),
        (
            ["--wheel", "kt-kernel=/a.whl", "--wheels-json", '{"kt-kernel": {"path": "/b.whl"}}'],
            "wheel kt-kernel is overridden by both --wheel and --wheels-json",
        ),
        (["--conda-exe", ""], "--conda-exe is empty"),
    ],
)
def test_repeated_or_empty_check_options_are_refused(tmp_path, extra, message):
    _refused(runner.invoke(app, [*_check_argv(tmp_path, "kt-0.7"), *extra]), message)


def test_a_key_given_twice_in_a_site_profile_is_refused(tmp_path):
    """Before: YAML kept the last `inference:` without a word, so drift passed a wrong freeze."""
    site = _site(tmp_path, HEAD + ENV + "  inference:\n    name: other\n    packages: [a==2]\n")
    for argv in (["profile", "show", str(site), "--json"], _check_argv(tmp_path, str(site))):
        _refused(runner.invoke(app, argv), f"profile file {site} is not valid YAML (line 8, column 3)",
                 "key 'inference' is given twice in one mapping")  # fmt: skip
