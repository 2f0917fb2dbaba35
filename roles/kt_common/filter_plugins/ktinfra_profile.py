"""Site profile files in the roles: which stack names are files, and where ktinfra's copy of one lives.

A stack (kt_preflight_stack, kt_python_env_profile) is a shipped profile's name (kt-0.7) or a site's profile
file, a controller path ending in .yaml or .yml, as ktinfra.profiles.is_profile_file decides. kt_python_env
installs such a file next to ktinfra on the target, <ktinfra prefix>/profiles/<file name>, where the plans
read it. kt_preflight and kt_python_env both need the two answers; before, each wrote its own regex and path.

    {{ kt_preflight_stack | ktinfra_site_profile }}                                -> true / false
    {{ kt_python_env_profile | ktinfra_profile_copy(kt_preflight_ktinfra_exe) }}
        -> /opt/ktinfra/tool/profiles/site.yaml
"""

from __future__ import annotations

import posixpath


def ktinfra_site_profile(stack: str) -> bool:
    """Whether `stack` names a site's profile file rather than a shipped profile."""
    return str(stack).endswith((".yaml", ".yml"))


def ktinfra_profile_copy(stack: str, ktinfra_exe: str) -> str:
    """The target path of the installed copy of the site profile file `stack`, for ktinfra at `ktinfra_exe`
    (<prefix>/bin/ktinfra): <prefix>/profiles/<the file's name>."""
    prefix = posixpath.dirname(posixpath.dirname(str(ktinfra_exe)))
    return posixpath.join(prefix, "profiles", posixpath.basename(str(stack)))


class FilterModule:
    """For every role that lists kt_common in its meta dependencies."""

    def filters(self) -> dict:
        return {"ktinfra_site_profile": ktinfra_site_profile, "ktinfra_profile_copy": ktinfra_profile_copy}
