"""The table of options bound to a public function's signature, once, where the user calls it.

As scikit-learn's ``validate_params`` binds a function's parameter constraints to its signature,
:func:`bound_options` binds :data:`calibtest.options.OPTIONS` to a front door's: the arguments are bound
to the signature (an unknown keyword is an ``OptionTypeError`` naming it and the function), every argument
the caller gave whose parameter has an entry in the table is checked against it and passed on in its
canonical form, and an ``eval_env=`` frame count is resolved to the caller's namespace there, so that the
function below reads checked options and an evaluation environment, and checks nothing of the table again.

Parameters whose valid values depend on other arguments (``calib_test``'s grid of ``n_bins``) stay with the
function, named by mapping them to None.
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable, ParamSpec, TypeVar

from calibtest.inputs.formula import resolve_env
from calibtest.options import OPTIONS, OptionTypeError

__all__ = ["bound_options", "table_entries"]

P = ParamSpec("P")
R = TypeVar("R")


def table_entries(func: Callable, **entries: str | None) -> dict[str, str]:
    """Parameter -> table entry of ``func``: each parameter named in :data:`OPTIONS`, with ``entries``' renames
    (``null="test_null"``) and exclusions (``n_bins=None``)."""
    out = {}
    for name in inspect.signature(func).parameters:
        entry = entries.get(name, name)
        if entry is not None and entry in OPTIONS:
            out[name] = entry
    unknown = set(entries) - set(inspect.signature(func).parameters)
    if unknown:
        raise ValueError(f"{func.__name__} has no parameter {sorted(unknown)}")
    return out


def bound_options(function: str, **entries: str | None) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate the front door ``function`` (its name in messages): bind, check and canonicalise its options.

    Parameters
    ----------
    function : str
        The name messages give the function, e.g. ``"calib_ci"``.
    **entries : str or None
        A parameter's table entry where it differs from its name, or None for a parameter the function
        checks itself.
    """
    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(func)
        table = table_entries(func, **entries)
        takes_env = "eval_env" in signature.parameters

        @functools.wraps(func)
        def front_door(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise OptionTypeError(f"{function}(): {exc}") from None
            given = bound.arguments
            for name, entry in table.items():
                if name in given:
                    given[name] = OPTIONS[entry].check(given[name], name)
            if takes_env:  # the caller's namespace, captured here: one frame below the user's call
                given["eval_env"] = resolve_env(given.get("eval_env", signature.parameters["eval_env"].default))
            return func(*bound.args, **bound.kwargs)

        front_door.options_table = table  # type: ignore[attr-defined]
        return front_door
    return decorate
