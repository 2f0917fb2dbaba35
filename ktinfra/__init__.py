"""ktinfra: turn a GPU + Intel-AMX Linux host into a KTransformers box."""

__version__ = "0.1.0"
