"""Loading libksearch and its ctypes declarations.

The installed package carries the library (ksearch/_native/lib/libksearch.so,
with its worker beside it under _native/libexec) and ksearch/_abi.py, the
declarations the build generated from ksearch.h. Used from a source tree
instead (bindings/python on sys.path), the declarations are generated in
memory from include/ksearch/ksearch.h and the library is the build tree's
(build/capi) or $KSEARCH_LIBRARY's.
"""

from __future__ import annotations

import ctypes
import os
import sys
import types
from pathlib import Path
from typing import Any, Optional, TypeVar, Union

_HERE = Path(__file__).resolve().parent
_SOURCE_TREE = _HERE.parent.parent.parent  # bindings/python/ksearch -> the repository


def _load_abi() -> types.ModuleType:
    try:
        from . import _abi  # written by the package build
        return _abi
    except ImportError:
        pass
    header = _SOURCE_TREE / "include" / "ksearch" / "ksearch.h"
    if not header.exists():
        raise ImportError("ksearch: the package has no _abi.py (it was not built) and no ksearch.h is beside it; "
                          "install it with `pip install ./bindings/python`")
    from . import _abigen
    source = _abigen.python_source(_abigen.parse_headers(header), str(header))
    mod = types.ModuleType(__package__ + "._abi")
    mod.__package__ = __package__
    mod.__file__ = str(header)
    sys.modules[mod.__name__] = mod
    exec(compile(source, "<ksearch._abi from " + str(header) + ">", "exec"), mod.__dict__)
    setattr(sys.modules[__package__], "_abi", mod)  # as an import of the submodule would
    return mod


abi = _load_abi()


def library_path() -> str:
    """The libksearch this package loads: $KSEARCH_LIBRARY if set, else the one
    inside the package, else a source tree's build."""
    env = os.environ.get("KSEARCH_LIBRARY")
    if env:
        return env
    candidates = [_HERE / "_native" / "lib" / "libksearch.so",
                  _SOURCE_TREE / "build" / "capi" / "libksearch.so"]
    for c in candidates:
        if c.exists():
            return str(c)
    raise OSError("libksearch.so not found in the package (" + str(candidates[0]) +
                  "); reinstall it with `pip install ./bindings/python`, or set $KSEARCH_LIBRARY")


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(library_path())
    for name, (restype, argtypes) in abi.FUNCTIONS.items():
        fn = getattr(lib, name, None)
        if fn is None:
            raise OSError(f"{library_path()} lacks {name}: the library is older than the package's ksearch.h")
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


_lib: Optional[ctypes.CDLL] = None


def c() -> Any:
    """The loaded library (loaded on first use)."""
    global _lib
    if _lib is None:
        _lib = _load()
    return _lib


_Owned = TypeVar("_Owned", bound="OwnedHandle")


class OwnedHandle:
    """A C object this Python object owns: close() (or the end of a `with`
    block, or garbage collection) releases it with the C function named by
    `_destroy`, once."""

    _destroy = ""
    _handle: Optional[ctypes.c_void_p] = None

    def close(self) -> None:
        if getattr(self, "_handle", None):
            getattr(c(), self._destroy)(self._handle)
            self._handle = None

    def __enter__(self: _Owned) -> _Owned:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class KsearchError(RuntimeError):
    """A libksearch failure: `status` is the ks_status code, the message says why."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{message} ({_status_name(status)})")
        self.status = status
        self.message = message


def _status_name(status: int) -> str:
    try:
        return str(abi.Status(status).name)
    except ValueError:
        return f"status {status}"


def check(status: int) -> None:
    if status != 0:
        raise KsearchError(status, c().ks_last_error_message().decode("utf-8", "replace"))


def to_bytes(s: Union[str, bytes, "os.PathLike[str]", None], name: str) -> Optional[bytes]:
    """`s` as a C string; `name` says which argument an error is about."""
    if s is None:
        return None
    if isinstance(s, str):
        b = s.encode()  # UnicodeEncodeError for lone surrogates, named below
    elif isinstance(s, (bytes, os.PathLike)):
        b = os.fsencode(s)
    else:
        raise TypeError(f"{name} must be a str or a path, not {type(s).__name__}")
    if b"\0" in b:  # ctypes would silently cut the string there
        raise ValueError(f"{name} contains a NUL character")
    return b


def text(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b else ""


def take_string(p: ctypes.c_void_p) -> str:
    """A `char **` result: decoded, then released with ks_string_free."""
    try:
        return text(ctypes.cast(p, ctypes.c_char_p).value)
    finally:
        c().ks_string_free(p)
