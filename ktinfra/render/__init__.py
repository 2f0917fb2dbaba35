"""`ktinfra render`: systemd units, env files and recipes from a `ktinfra plan --json` document.

Everything here imports without typer; ktinfra/commands/render.py is the CLI around it.
"""

from ktinfra.render.common import Rendered, RenderError
from ktinfra.render.files import write_bundle
from ktinfra.render.plans import load_plan
from ktinfra.render.serve import health_url, render_serve, sglang_argv

__all__ = [
    "RenderError",
    "Rendered",
    "health_url",
    "load_plan",
    "render_serve",
    "sglang_argv",
    "write_bundle",
]
