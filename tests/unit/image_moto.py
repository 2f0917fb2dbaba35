"""moto helpers shared by the image unit tests."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from moto.core import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends
from moto.ec2.models.amis import Ami

DLAMI = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) {}"


class _SizedAmi(Ami):
    """moto's Ami, whose root snapshot is always 15 GB, with a root snapshot of `root_gb`."""

    __module__ = Ami.__module__  # moto's model metaclass files models by their module (moto.SERVICE....)
    root_gb = 15

    @property
    def block_device_mappings(self):
        return [{**m, "Ebs": {**m["Ebs"], "VolumeSize": self.root_gb}} for m in super().block_device_mappings]


def publish_ami(
    region: str, ami_id: str, name: str, created: str, owner_alias="amazon", arch="x86_64", root_gb=15
):
    """An AMI as Amazon publishes it (owner alias 'amazon'), which register_image cannot make; its root
    snapshot `root_gb` GB (EC2 launches it on no smaller root volume)."""
    backend = ec2_backends[DEFAULT_ACCOUNT_ID][region]
    ami = backend.amis[ami_id] = _SizedAmi(
        backend,
        ami_id=ami_id,
        name=name,
        owner_id="898082745236",
        owner_alias=owner_alias,
        architecture=arch,
        creation_date=datetime.fromisoformat(created).replace(tzinfo=timezone.utc),
    )
    ami.root_gb = root_gb


# packer for an amazon-ebs build, which cannot run here (no AWS): writes the outputs a build leaves
# (packages.json and packer-manifest.json with one amazon-ebs build per artifact id, "REGION:AMI"), and, where
# the test sets them, logs its arguments to $FAKE_CALLS and copies the variables file ktinfra wrote to
# $FAKE_VARS_COPY
_STAND_IN_PACKER = """#!{python}
import json, os, shutil, sys
if os.environ.get("FAKE_CALLS"):
    open(os.environ["FAKE_CALLS"], "a").write(" ".join(sys.argv[1:]) + "\\n")
if sys.argv[1] == "version":
    print("Packer v1.6.6")
if sys.argv[1] != "build":
    sys.exit(0)
var_file = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("-var-file="))
if os.environ.get("FAKE_VARS_COPY"):
    shutil.copy(var_file, os.environ["FAKE_VARS_COPY"])
out = json.load(open(var_file))["output_dir"]
open(os.path.join(out, "packages.json"), "w").write(json.dumps({{"envs": {{}}}}))
artifacts = json.loads(os.environ.get("FAKE_ARTIFACTS") or {artifacts!r})
builds = [{{"builder_type": "amazon-ebs", "artifact_id": a, "packer_run_uuid": "u"}} for a in artifacts]
manifest = {{"builds": builds, "last_run_uuid": "u"}}
open(os.path.join(out, "packer-manifest.json"), "w").write(json.dumps(manifest))
"""


def stand_in_packer(path: Path, artifacts: list | None = None) -> Path:
    """An executable stand-in packer at `path` whose build names `artifacts` (else $FAKE_ARTIFACTS, JSON)."""
    path.write_text(_STAND_IN_PACKER.format(python=sys.executable, artifacts=json.dumps(artifacts or [])))
    path.chmod(0o755)
    return path
