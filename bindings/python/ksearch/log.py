"""The library's log: its warnings, notes and progress lines, in Python.

    import ksearch

    ksearch.set_log_level("info")                     # progress lines too (default: "warning")
    ksearch.set_log_callback(lambda level, message: print(f"[{level.label}] {message}"))
    ...
    ksearch.set_log_callback(None)                    # back to standard error

One process-wide sink (ks_log.h): the callback may be called from a thread of
the library (a heartbeat during a long evaluation), never twice at once. An
exception it raises is printed to standard error and the message is dropped.
"""

from __future__ import annotations

import sys
import threading
import traceback
from typing import Any, Callable, Optional, Union

from . import _abi as abi
from ._lib import c, check, text

LogLevel = abi.LogLevel
LogCallback = Callable[[LogLevel, str], Any]

_lock = threading.Lock()
_installed: Optional[Any] = None  # the ctypes callback the library holds; kept alive here


def _level(level: Union[LogLevel, str, int]) -> LogLevel:
    if isinstance(level, LogLevel):
        return level
    if isinstance(level, bool) or not isinstance(level, (str, int)):
        raise TypeError(f"level must be a LogLevel, one of debug, info, warning, error, off, not "
                        f"{type(level).__name__}")
    return LogLevel(level)  # a name goes through ks_log_level_parse (its message names the known ones)


def set_log_level(level: Union[LogLevel, str, int]) -> None:
    """The lowest level the sink gets: "debug", "info", "warning" (the default), "error" or "off"."""
    check(c().ks_log_set_level(int(_level(level))))


def log_level() -> LogLevel:
    """The level set now."""
    return LogLevel(c().ks_log_get_level())


def set_log_callback(callback: Optional[LogCallback], level: Union[LogLevel, str, int, None] = None) -> None:
    """Sends the library's log lines to `callback(level, message)` instead of
    standard error; None restores standard error. `level`, when given, is
    set too (set_log_level)."""
    global _installed
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable or None, not {type(callback).__name__}")
    if level is not None:
        set_log_level(level)
    with _lock:
        if callback is None:
            check(c().ks_log_set_callback(abi.ks_log_callback(), None))
            _installed = None
            return

        def trampoline(_user: Any, lvl: int, message: Optional[bytes]) -> None:
            try:
                callback(LogLevel(lvl), text(message))
            except BaseException:  # nothing may unwind into C
                traceback.print_exc(file=sys.stderr)

        fn = abi.ks_log_callback(trampoline)
        check(c().ks_log_set_callback(fn, None))
        _installed = fn  # the previous one is no longer called: the library swapped under its lock
