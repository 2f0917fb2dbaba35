"""`ktinfra lora check --model a:b`: SGLang (sglang-kt 0.7.2 and the legacy fork, serving_base.py
_parse_model_parameter) reads what follows the first ':' of a request's model as the adapter name, ahead of
the lora_path field. So `--model a:b --adapter x` was sent as model 'a:b:x' (adapter 'b:x'), `--model a:b`
alone asked for adapter 'b', and --legacy's lora_path was overridden by 'b': the check tested another adapter
or failed with an error about one nobody named. Such a --model is refused before any request."""

from __future__ import annotations

import pytest
from test_lora_cli_errors import assert_clean_error, invoke

from ktinfra import lora


@pytest.mark.parametrize(
    ("adapter", "legacy"), [("x", False), (None, False), ("x", True)], ids=["adapter", "none", "legacy"]
)
def test_a_model_name_with_a_colon_is_refused_before_any_request(adapter, legacy):
    # nothing listens on port 9: the old code sent the request and returned ok False instead of raising
    with pytest.raises(lora.LoraError, match=r"SGLang reads what follows the first ':'.*here 'b'"):
        lora.chat_check("http://127.0.0.1:9", "a:b", adapter, legacy, timeout_s=2.0)


def test_the_cli_says_why_and_how():
    args = ["lora", "check", "--url", "http://127.0.0.1:9", "--model", "org/m:v2", "--adapter", "x"]
    result = invoke([*args, "--timeout", "2", "--json"])
    assert_clean_error(result, "--model 'org/m:v2' holds a ':'")
    assert "pass a model name without ':'" in result.output and "with --adapter" in result.output


def test_an_adapter_name_with_a_colon_is_sent_whole():
    # SGLang splits on the first ':' only: model 'm' + adapter 'x:y' selects adapter 'x:y'
    result = lora.chat_check("http://127.0.0.1:9", "m", "x:y", timeout_s=2.0)
    assert result["request"]["model"] == "m:x:y" and not result["ok"]
