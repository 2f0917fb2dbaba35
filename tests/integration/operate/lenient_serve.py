"""`transformers serve`, with its check for unknown request fields relaxed from HTTP 422 to a warning.

sglang-router re-serializes every chat request with SGLang-only fields (ignore_eos,
skip_special_tokens, no_stop_trim, separate_reasoning, stream_reasoning, return_hidden_states,
continue_final_message; seen with sglang-router 0.3.2 in both `--backend sglang` and `--backend openai`
modes). SGLang accepts them; transformers serve rejects them. Everything else (server, model,
generation) is the unmodified transformers server; the unknown fields are dropped with a warning.
Run with the serving venv's python, with the same arguments as `transformers serve`.
"""

import logging
import sys

from transformers.cli.serving import utils

log = logging.getLogger("lenient_serve")


def _warn_unknown_fields(self, body: dict) -> None:
    known = getattr(self._valid_params_class, "__mutable_keys__", None)
    if known is not None and set(body) - set(known):
        log.warning("ignoring fields transformers does not know: %s", sorted(set(body) - set(known)))
        for key in set(body) - set(known):
            body.pop(key)


utils.BaseHandler._validate_request = _warn_unknown_fields

if __name__ == "__main__":
    from transformers.cli.transformers import main

    sys.argv = ["transformers", "serve", *sys.argv[1:]]
    sys.exit(main())
