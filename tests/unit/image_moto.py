"""moto helpers shared by the image unit tests."""

from __future__ import annotations

from datetime import datetime, timezone

from moto.core import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends
from moto.ec2.models.amis import Ami

DLAMI = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) {}"


def publish_ami(region: str, ami_id: str, name: str, created: str, owner_alias="amazon", arch="x86_64"):
    """An AMI as Amazon publishes it (owner alias 'amazon'), which register_image cannot make."""
    backend = ec2_backends[DEFAULT_ACCOUNT_ID][region]
    backend.amis[ami_id] = Ami(
        backend,
        ami_id=ami_id,
        name=name,
        owner_id="898082745236",
        owner_alias=owner_alias,
        architecture=arch,
        creation_date=datetime.fromisoformat(created).replace(tzinfo=timezone.utc),
    )
