"""Imports every command module so that each registers itself on the group."""

from routectl.cli import (
    config_cmd,  # noqa: F401
    diff_cmd,  # noqa: F401
    native_cmd,  # noqa: F401
    snapshot_cmd,  # noqa: F401
)
