"""ktinfra test wheel: importing it proves the local-path wheel was installed from the wheelhouse."""

BUILT_FOR = "ktinfra molecule"
