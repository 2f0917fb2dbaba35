"""Image checks: what `ktinfra image build` promises about a finished image (run by `ktinfra image verify`).

    KTINFRA_IMAGE_MANIFEST=out/image/kt-0.7-docker/manifest.json \
        pytest tests/integration/image/testinfra/image_checks.py --hosts=docker://CONTAINER
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def image_manifest() -> dict:
    path = os.environ.get("KTINFRA_IMAGE_MANIFEST")
    if not path or not Path(path).is_file():
        pytest.fail("KTINFRA_IMAGE_MANIFEST must name the build's manifest.json")
    return json.loads(Path(path).read_text())
