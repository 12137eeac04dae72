"""The base of the enums generated from ks_enums.h and status.h."""

from __future__ import annotations

import ctypes
import enum
from typing import Any


class KsEnum(enum.IntEnum):
    """A closed set of the C ABI. Members compare equal to their C values;
    `label` is the name the CLI and the run folder use ("world_model"), and
    the class also takes that name: Strategy("world_model")."""

    _c_name: str  # the C enum's name, set by _abi.py

    @property
    def label(self) -> str:
        from ._lib import c
        fn = getattr(c(), type(self)._c_name + "_name", None)
        if fn is None:  # ks_status has ks_status_string
            fn = getattr(c(), type(self)._c_name + "_string")
        return str(fn(int(self)).decode())

    @classmethod
    def _missing_(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return None
        from ._lib import c, text
        parse = getattr(c(), cls._c_name + "_parse", None)
        if parse is None:
            return None
        out = ctypes.c_int()
        if parse(value.encode(), ctypes.byref(out)) != 0:  # the message names the known values
            raise ValueError(f"{cls.__name__}: {text(c().ks_last_error_message())}")
        return cls(out.value)
