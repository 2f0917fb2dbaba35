"""A testinfra local host that sees files as a user who is not root does: run as root (this machine), its
commands go without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (setpriv), so file modes apply to them; run as
another user, it is the plain local host. Only what the host suite asks of a host: run() and file().exists."""

from __future__ import annotations

import os
import shlex
import types

import testinfra

NO_DAC = "dac_override,-dac_read_search"


class NotRootHost:
    def __init__(self):
        self.host = testinfra.get_host("local://")

    def run(self, command: str):
        if os.geteuid() != 0:
            return self.host.run(command)
        drop = f"setpriv --inh-caps=-{NO_DAC} --bounding-set=-{NO_DAC} sh -c "
        return self.host.run(drop + shlex.quote(command))

    def file(self, path: str):  # testinfra's host.file(PATH).exists, asked the same way
        return types.SimpleNamespace(exists=self.run(f"test -e {shlex.quote(path)}").rc == 0)
