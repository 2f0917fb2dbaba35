"""AWS side of the amazon-ebs source: the base AMI for a region and the AMX check of an instance type.

Both run with boto3 before packer starts, so bad input is refused before anything is launched.
"""

from __future__ import annotations

import re

from ktinfra.image import ImageError

# NVIDIA driver + CUDA base images published by Amazon, preferred first; both releases have glibc >= 2.35
# (manylinux_2_35). Only patterns for a release whose python3 the profile accepts are tried.
AMI_OWNERS = ("amazon",)
AMI_NAME_PATTERNS = (
    "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04)*",
    "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)*",
    "Deep Learning Base GPU AMI (Ubuntu 22.04)*",
)
# The python3 of each Ubuntu release: playbooks/image.yml makes venvs of it and installs no other Python.
UBUNTU_PYTHON = {"20.04": "3.8", "22.04": "3.10", "24.04": "3.12"}
_UBUNTU_RE = re.compile(r"\bUbuntu (\d+\.\d+)")
# Intel families with Sapphire Rapids or later (AMX) that do not follow the <letter><gen>i naming.
AMX_FAMILIES_EXTRA = {"p5en", "p6-b200", "p6-b300", "u7i", "u7in", "u7i-6tb", "u7i-8tb", "u7i-12tb"}
# used with fullmatch: with match and a closing $, "m7i.8xlarge\n" passed (re's $ matches before a final \n)
_TYPE_RE = re.compile(r"(?P<family>(?P<series>[a-z]+)(?P<gen>\d+)(?P<attrs>[a-z0-9-]*))\.[a-z0-9-]+")


def base_python(ami_name: str | None) -> tuple[str | None, str | None]:
    """(Ubuntu release, its python3) read from an AMI name; None for what the name does not tell."""
    m = _UBUNTU_RE.search(ami_name or "")
    return (m[1], UBUNTU_PYTHON.get(m[1])) if m else (None, None)


def check_base_python(ami_name: str | None, pythons: list[str] | None) -> None:
    """ImageError when the AMI's Ubuntu release has no Python the profile accepts (unknown: let it be)."""
    release, python = base_python(ami_name)
    if pythons and python and python not in pythons:
        raise ImageError(
            f"base AMI {ami_name!r} is Ubuntu {release} with Python {python}, and the profile needs Python "
            f"{' or '.join(pythons)} (the image build makes venvs of the system python3); "
            f"choose a base AMI of {_releases_for(pythons)} with --source-ami"
        )


def _releases_for(pythons: list[str]) -> str:
    releases = [f"Ubuntu {r}" for r, py in UBUNTU_PYTHON.items() if py in pythons]
    return " or ".join(releases) or f"a release with Python {' or '.join(pythons)}"


DEFAULT_ROOT_DEVICE = "/dev/sda1"  # the Ubuntu AMIs' root device


def root_snapshot_gb(image: dict, root_device: str) -> int | None:
    """The size (GB) of the snapshot the AMI's root device is made from: EC2 refuses to launch it on a smaller
    volume (InvalidBlockDeviceMapping); None when describe_images does not say."""
    for mapping in image.get("BlockDeviceMappings") or []:
        size = (mapping.get("Ebs") or {}).get("VolumeSize")
        if mapping.get("DeviceName") == root_device and isinstance(size, int) and size > 0:
            return size
    return None


def usable_ami_patterns(pythons: list[str] | None, name_patterns=AMI_NAME_PATTERNS) -> list[str]:
    """The base AMI name patterns whose Ubuntu python3 is one of `pythons` (all when None); ImageError when
    none is: known from the names alone, so `image build --check` refuses it before AWS is asked."""
    usable = [p for p in name_patterns if not pythons or base_python(p)[1] in (None, *pythons)]
    if not usable:
        shipped = ", ".join(f"Ubuntu {r} {py}" for r, py in UBUNTU_PYTHON.items())
        raise ImageError(
            f"no NVIDIA Deep Learning base AMI ships Python {' or '.join(pythons or [])}, which the profile "
            f"needs (python3 of {shipped}; the image build makes venvs of it); pass --source-ami ami-... "
            "of an image that has it"
        )
    return usable


def find_source_ami(
    ec2, region: str, name_patterns=AMI_NAME_PATTERNS, owners=AMI_OWNERS, pythons: list[str] | None = None
) -> dict:
    """Newest available x86_64 NVIDIA/Deep-Learning base AMI of the region whose Ubuntu python3 is one of
    `pythons` (any when None): {id, name, created, pattern}."""
    usable = usable_ami_patterns(pythons, name_patterns)
    for pattern in usable:
        resp = ec2.describe_images(
            Owners=list(owners),
            Filters=[
                {"Name": "name", "Values": [pattern]},
                {"Name": "state", "Values": ["available"]},
                {"Name": "architecture", "Values": ["x86_64"]},
            ],
        )
        images = sorted(resp.get("Images", []), key=lambda i: i.get("CreationDate", ""), reverse=True)
        if images:
            best = images[0]
            root = best.get("RootDeviceName") or DEFAULT_ROOT_DEVICE
            return {
                "id": best["ImageId"],
                "name": best["Name"],
                "created": best.get("CreationDate"),
                "pattern": pattern,
                "root_device": root,
                "root_snapshot_gb": root_snapshot_gb(best, root),
            }
    skipped = [p for p in name_patterns if p not in usable]
    skipped_note = (
        f"; not tried: {' | '.join(skipped)} (their python3 is not Python {' or '.join(pythons or [])})"
        if skipped
        else ""
    )
    raise ImageError(
        f"no NVIDIA Deep Learning base AMI found in region {region} (owners {', '.join(owners)}; "
        f"names {' | '.join(usable)}{skipped_note}); pass --source-ami ami-... to choose one"
    )


def is_amx_family(instance_type: str) -> bool:
    m = _TYPE_RE.fullmatch(instance_type)
    if not m:
        return False
    if m["family"] in AMX_FAMILIES_EXTRA:
        return True
    # m7i, c7i(-flex), r7i, r7iz, i7ie, m8i, c8i, r8i, x8i, ...: Intel from the 7th generation on
    return int(m["gen"]) >= 7 and m["attrs"].startswith("i")


_AMX_FAMILIES = "(needs Intel Sapphire Rapids or later: m7i/c7i/r7i/m8i/..., or p5en for H200 GPUs)"


def _check_type_syntax(instance_type: str) -> None:
    if not _TYPE_RE.fullmatch(instance_type):
        raise ImageError(f"{instance_type!r} is not an EC2 instance type (like m7i.8xlarge)")


def check_instance_type(ec2, instance_type: str) -> dict:
    """Refuse an instance type whose CPUs lack AMX; returns {type, manufacturer, vcpus, gpus}."""
    _check_type_syntax(instance_type)
    try:
        resp = ec2.describe_instance_types(InstanceTypes=[instance_type])
    except ec2.exceptions.ClientError as exc:
        raise ImageError(f"instance type {instance_type} is not offered: {exc}") from exc
    types = resp.get("InstanceTypes", [])
    if not types:
        raise ImageError(f"instance type {instance_type} is not offered in this region")
    info = types[0]
    cpu = info.get("ProcessorInfo", {})
    manufacturer = cpu.get("Manufacturer", "unknown")
    if "x86_64" not in cpu.get("SupportedArchitectures", []):
        raise ImageError(
            f"{instance_type} is not x86_64 ({cpu.get('SupportedArchitectures')}): kt-kernel needs AMX"
        )
    if manufacturer != "Intel" or not is_amx_family(instance_type):
        raise ImageError(f"{instance_type} has {manufacturer} CPUs without AMX {_AMX_FAMILIES}")
    gpus = [
        {
            "name": g.get("Name"),
            "count": g.get("Count"),
            "memory_mib": g.get("MemoryInfo", {}).get("SizeInMiB"),
        }
        for g in info.get("GpuInfo", {}).get("Gpus", [])
    ]
    return {
        "type": instance_type,
        "manufacturer": manufacturer,
        "vcpus": info.get("VCpuInfo", {}).get("DefaultVCpus"),
        "gpus": gpus,
    }


def describe_ami(ec2, ami_id: str) -> dict:
    """{id, name, created, root_device} of an AMI given with --source-ami, refused unless it is an available
    x86_64 image (an arm64 one cannot boot on the AMX instance types; a pending one fails the launch)."""
    images = ec2.describe_images(ImageIds=[ami_id]).get("Images", [])
    if not images:
        raise ImageError(f"--source-ami {ami_id} is not an AMI this account can use")
    image = images[0]
    arch, state = image.get("Architecture"), image.get("State")
    if arch != "x86_64":
        raise ImageError(
            f"--source-ami {ami_id} ({image.get('Name')}) is {arch}: the AMX instance types are x86_64"
        )
    if state not in (None, "available"):
        raise ImageError(f"--source-ami {ami_id} ({image.get('Name')}) is {state}, not available")
    # the root volume is sized by its device name: another name would add a second, empty disk
    root = image.get("RootDeviceName") or DEFAULT_ROOT_DEVICE
    return {
        "id": ami_id,
        "name": image.get("Name"),
        "created": image.get("CreationDate"),
        "root_device": root,
        "root_snapshot_gb": root_snapshot_gb(image, root),
    }


# what EC2 takes as an AMI id (ami- and 8 or 17 hex digits) and a region name (us-east-1, us-gov-west-1,
# cn-northwest-1, eu-isoe-west-1): checked with the rest of the input, before make image installs packer
_AMI_ID_RE = re.compile(r"ami-[0-9a-f]{8}(?:[0-9a-f]{9})?")
_REGION_RE = re.compile(r"[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}")


def check_names(region: str, source_ami: str | None) -> None:
    """ImageError unless --region is a region name and --source-ami (when given) an AMI id (no AWS asked)."""
    if not _REGION_RE.fullmatch(region):
        raise ImageError(f"--region {region!r} is not an AWS region name (like us-east-1 or eu-west-1)")
    if source_ami is not None and not _AMI_ID_RE.fullmatch(source_ami):
        raise ImageError(
            f"--source-ami {source_ami!r} is not an AMI id (ami- and 8 or 17 hex digits, like "
            "ami-0123456789abcdef0)"
        )


def check_type_name(instance_type: str) -> None:
    """An instance type name that is well formed and of a family with AMX CPUs (no AWS asked)."""
    _check_type_syntax(instance_type)
    if not is_amx_family(instance_type):
        raise ImageError(f"{instance_type} is not a family with AMX CPUs {_AMX_FAMILIES}")


def look_up(
    region: str, instance_type: str, source_ami: str | None, ec2=None, pythons: list[str] | None = None
) -> tuple[dict, dict]:
    """check_instance_type and the base AMI (source_ami or find_source_ami), checked to ship one of
    `pythons`, with boto3's own failures (no credentials, no connection, a refused request) turned into
    ImageError."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    check_type_name(
        instance_type
    )  # what the name tells needs no AWS: refused before credentials are looked for
    try:
        ec2 = ec2 or ec2_client(region)
        itype = check_instance_type(ec2, instance_type)
        ami = describe_ami(ec2, source_ami) if source_ami else find_source_ami(ec2, region, pythons=pythons)
        check_base_python(ami["name"], pythons)
    except NoCredentialsError as exc:
        raise ImageError(
            f"AWS credentials not found ({exc}): set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
            "or run `aws configure`"
        ) from exc
    except (BotoCoreError, ClientError) as exc:
        raise ImageError(f"AWS request in region {region} failed: {exc}") from exc
    return itype, ami


def ec2_client(region: str):
    import boto3

    return boto3.client("ec2", region_name=region)


# EC2 tags: a key of 1 to 128 characters that does not start with aws: (reserved, in any case), a value of
# 0 to 256, at most 50 tags a resource. packer 1.6.6 renders tag keys and values as Go templates, so a "{{"
# would be replaced by what it renders. EC2 refuses a bad tag only when packer launches the instance.
TAG_KEY_MAX, TAG_VALUE_MAX, TAGS_PER_RESOURCE = 128, 256, 50


def parse_tags(items: list[str], set_by_ktinfra: tuple[str, ...]) -> dict[str, str]:
    """--aws-tag KEY=VALUE items as a dict; ImageError naming the item when EC2 or packer would not take it,
    when a key is given twice or is one of `set_by_ktinfra` (which the template also sets, besides Name)."""
    tags: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise ImageError(f"--aws-tag {item!r} is not KEY=VALUE")
        why = None
        if not 1 <= len(key) <= TAG_KEY_MAX:
            why = f"its key is {len(key)} characters (EC2 takes 1 to {TAG_KEY_MAX})"
        elif key.lower().startswith("aws:"):
            why = "its key starts with aws:, which AWS reserves"
        elif len(value) > TAG_VALUE_MAX:
            why = f"its value is {len(value)} characters (EC2 takes at most {TAG_VALUE_MAX})"
        elif "{{" in key or "{{" in value:
            why = "it holds '{{', which packer reads as a template in tag keys and values"
        elif key in set_by_ktinfra:
            why = f"ktinfra sets {key} itself ({', '.join(set_by_ktinfra)})"
        elif key in tags:
            why = f"{key} is given twice"
        if why:
            raise ImageError(f"--aws-tag {item!r}: {why}")
        tags[key] = value
    count = len({"Name", *set_by_ktinfra, *tags})
    if count > TAGS_PER_RESOURCE:
        raise ImageError(
            f"--aws-tag: {len(tags)} tags and the {len(set_by_ktinfra) + 1} ktinfra sets (Name, "
            f"{', '.join(set_by_ktinfra)}) make {count}; EC2 takes at most {TAGS_PER_RESOURCE} on a resource"
        )
    return tags


def require_imds_v2(ec2, ami_id: str, region: str) -> None:
    """Set the built AMI's ImdsSupport to v2.0 (instances started from it require IMDSv2), which packer 1.6.6
    cannot ask for; EC2 offers no way back. ImageError naming the AMI, which exists, when EC2 refuses."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        ec2 = ec2 or ec2_client(region)
        ec2.modify_image_attribute(ImageId=ami_id, ImdsSupport={"Value": "v2.0"})
    except (BotoCoreError, ClientError) as exc:
        raise ImageError(
            f"AMI {ami_id} was built and exists in {region}, but setting its ImdsSupport to v2.0 failed: "
            f"{exc}. Set it with `aws ec2 modify-image-attribute --region {region} --image-id {ami_id} "
            "--imds-support v2.0` (needs ec2:ModifyImageAttribute), or leave it as it is"
        ) from exc
