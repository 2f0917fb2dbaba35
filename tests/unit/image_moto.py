"""moto helpers shared by the image unit tests."""

from __future__ import annotations

from datetime import datetime, timezone

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
