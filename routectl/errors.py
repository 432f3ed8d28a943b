"""Error types whose class decides the CLI exit code."""

from __future__ import annotations


class RoutectlError(Exception):
    """Base class of every error routectl raises on purpose."""

    exit_code = 3


class InputError(RoutectlError):
    """Bad input from the user: malformed file, invalid variable, unknown name (exit 2)."""

    exit_code = 2


class ActivationError(RoutectlError, TypeError):
    """A prepared layer was called with activations its layout cannot consume (a dtype the
    kernel does not take): the engine's bug, raised at call time, never a route."""


class SelectionError(RoutectlError):
    """No kernel can serve a layer, or a fail-closed outcome refused the layer.

    Carries a stable code and every candidate's verdict so that rows, `explain` and engine
    errors all show the same reasons.
    """

    exit_code = 3

    def __init__(self, code: str, message: str, verdicts: tuple = ()) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.verdicts = verdicts
