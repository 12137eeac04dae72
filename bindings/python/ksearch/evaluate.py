"""Tasks and single evaluations with the built-in evaluator."""

from __future__ import annotations

import ctypes
import json
import os
from typing import Any, Dict, Optional, Union

from ._lib import OwnedHandle, c, check, take_string, text, to_bytes
from .options import EvalOptions, _Keep

__all__ = ["Task", "Evaluator", "load_task"]


class Task(OwnedHandle):
    """A built-in task by name ("gpumode/trimul") or a task file or folder."""

    _destroy = "ks_task_destroy"

    def __init__(self, name_or_path: Union[str, "os.PathLike[str]"]):
        if name_or_path is None:
            raise TypeError("a task name or path is needed, not None")
        h = ctypes.c_void_p()
        check(c().ks_task_load(to_bytes(name_or_path, "task"), ctypes.byref(h)))
        self._handle: Optional[ctypes.c_void_p] = h
        self.name: str = text(c().ks_task_name(h))
        self.spec: Dict[str, Any] = json.loads(text(c().ks_task_json(h)))

    def __repr__(self) -> str:
        return f"Task({self.name!r})"


def load_task(name_or_path: Union[str, "os.PathLike[str]"]) -> Task:
    return Task(name_or_path)


class Evaluator(OwnedHandle):
    """Compiles, checks and times single solutions with the built-in
    evaluator. `options` (an EvalOptions, or its fields as keywords) as a
    search takes them; callbacks are not used here."""

    _destroy = "ks_evaluator_destroy"

    def __init__(self, options: Optional[EvalOptions] = None, **fields: Any):
        opts = options.copy() if options is not None else EvalOptions()
        assert isinstance(opts, EvalOptions)
        for k, v in fields.items():
            setattr(opts, k, v)
        if opts.callback is not None or opts.batch_callback is not None:
            raise ValueError("Evaluator: the callback fields are for searches; this is the built-in evaluator")
        keep = _Keep()
        s = opts._c_defaults()
        opts._fill(s, keep, None, "eval")
        h = ctypes.c_void_p()
        check(c().ks_evaluator_create(ctypes.byref(s), ctypes.byref(h)))
        self._handle: Optional[ctypes.c_void_p] = h

    def evaluate(self, task: Task, solution: Union[str, Dict[str, Any]]) -> Dict[str, Any]:
        """`solution`: solution JSON (str or dict) or an LLM-style answer.
        Returns the evaluation; a kernel that fails is a status in it, not an error."""
        if not isinstance(task, Task):
            raise TypeError(f"task must be a ksearch.Task (see load_task), not {type(task).__name__}")
        if not getattr(self, "_handle", None):
            raise ValueError("this Evaluator is closed")
        if not task._handle:
            raise ValueError("this Task is closed")
        if isinstance(solution, dict):
            solution = json.dumps(solution)
        out = ctypes.c_void_p()
        check(c().ks_evaluate(self._handle, task._handle, to_bytes(solution, "solution"), ctypes.byref(out)))
        result: Dict[str, Any] = json.loads(take_string(out))
        return result

