"""`transformers serve`, with its check for unknown request fields relaxed from HTTP 422 to a warning.

Why: sglang-router (0.1.9 up to 0.3.2, the newest on PyPI) parses each chat request into its own typed
request and re-serializes it, adding seven SGLang-only sampling fields with their defaults even when the
client sent none: no_stop_trim, ignore_eos, continue_final_message, skip_special_tokens, separate_reasoning,
stream_reasoning, return_hidden_states (and max_tokens becomes max_completion_tokens, which transformers
accepts). Same in `--backend sglang` and `--backend openai`; `--mini-lb` serves PD disaggregation only.
transformers 5.23 (`BaseHandler._validate_request` in transformers/cli/serving/utils.py) answers any field
outside its OpenAI request schema with 422 "Unexpected fields in the request", each of the seven alone too.
sglang-router 0.1.4-0.1.8 add only standard OpenAI fields (stream, logprobs) and work with the unmodified
server, but lack the --health-check-* flags and the /workers endpoint that the kt_router role and the router
tests use. SGLang itself accepts the seven fields, so only this test server needs the change: they are
dropped with a warning; everything else (server, model, generation) is the unmodified transformers server.
test_router_real.py keeps the reason checked: the unmodified server behind the same router still gets 422.
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
