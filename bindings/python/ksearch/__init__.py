"""Python bindings for libksearch, over its C ABI (ctypes; no compiled extension).

    import ksearch

    def my_model(kind, system, prompt):
        return call_my_llm(system, prompt)          # return the answer text

    result = ksearch.run_search("examples/tasks/matmul", language="cpp",
                                strategy="greedy", max_rounds=8, llm=my_model)
    print(result.best_latency_ms, result.run_dir)

The shared library is found through $KSEARCH_LIBRARY, next to this package
(an installed tree), in the build tree, or on the loader's search path.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
from pathlib import Path
from typing import Callable, Optional, Union

__all__ = [
    "KsearchError", "PROMPT_KINDS", "Result", "Task", "Evaluator",
    "version", "run_search", "resume_search", "load_task", "stop",
]

PROMPT_KINDS = ("wm_init", "wm_propose", "wm_refine", "wm_too_hard", "generate", "debug", "improve")
_KS_E_USER = -11
_KS_E_CANCELLED = -10


class KsearchError(RuntimeError):
    """A libksearch failure: `status` is the ks_status code, the message says why."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{message} (status {status})")
        self.status = status


class _StopSearch(Exception):
    pass


def _find_library() -> str:
    env = os.environ.get("KSEARCH_LIBRARY")
    if env:
        return env
    here = Path(__file__).resolve().parent
    candidates = [
        here / "libksearch.so",
        here.parent.parent.parent / "lib" / "libksearch.so",          # <prefix>/lib/pythonX/site-packages/ksearch
        here.parent.parent.parent / "build" / "capi" / "libksearch.so",  # source tree, build/ next to bindings/
    ]
    for c in candidates:
        if c.exists():
            return str(c)
    found = ctypes.util.find_library("ksearch")
    if found:
        return found
    raise OSError("libksearch.so not found; set KSEARCH_LIBRARY to its path")


# ---- C declarations (mirror include/ksearch/ksearch.h) ---------------------

class _LlmRequest(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("system", ctypes.c_char_p), ("prompt", ctypes.c_char_p)]


class _RoundReport(ctypes.Structure):
    _fields_ = [
        ("round", ctypes.c_int), ("max_rounds", ctypes.c_int),
        ("action", ctypes.c_char_p), ("status", ctypes.c_char_p), ("solution_id", ctypes.c_char_p),
        ("latency_ms", ctypes.c_double), ("best_latency_ms", ctypes.c_double), ("best_speedup", ctypes.c_double),
        ("improved", ctypes.c_int), ("replayed", ctypes.c_int),
        ("elapsed_s", ctypes.c_double), ("cost_usd", ctypes.c_double),
    ]


_LLM_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_LlmRequest), ctypes.c_void_p, ctypes.c_void_p)
_PROGRESS_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_RoundReport), ctypes.c_void_p)

_SEARCH_PARAMS_VERSION = 1


class _SearchParams(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("task", ctypes.c_char_p), ("strategy", ctypes.c_char_p), ("language", ctypes.c_char_p),
        ("max_rounds", ctypes.c_int), ("wm_stagnation_window", ctypes.c_int), ("wm_max_difficulty", ctypes.c_int),
        ("parallel", ctypes.c_int), ("tune_rounds", ctypes.c_int),
        ("seed", ctypes.c_uint64),
        ("max_cost_usd", ctypes.c_double), ("max_wall_s", ctypes.c_double),
        ("run_dir", ctypes.c_char_p),
        ("llm", ctypes.c_char_p), ("model", ctypes.c_char_p), ("base_url", ctypes.c_char_p),
        ("api_key_env", ctypes.c_char_p),
        ("llm_callback", _LLM_CALLBACK), ("llm_user_data", ctypes.c_void_p),
        ("progress_callback", _PROGRESS_CALLBACK), ("progress_user_data", ctypes.c_void_p),
        ("backend", ctypes.c_char_p), ("in_process", ctypes.c_int),
        ("timing_cap_s", ctypes.c_double),
    ]


def _load():
    lib = ctypes.CDLL(_find_library())
    sigs = {
        "ks_version_string": (ctypes.c_char_p, []),
        "ks_last_error_message": (ctypes.c_char_p, []),
        "ks_status_string": (ctypes.c_char_p, [ctypes.c_int]),
        "ks_llm_answer_set_text": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]),
        "ks_llm_answer_set_usage": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_double]),
        "ks_search_params_init": (ctypes.c_int, [ctypes.POINTER(_SearchParams), ctypes.c_uint32]),
        "ks_search_run": (ctypes.c_int, [ctypes.POINTER(_SearchParams), ctypes.POINTER(ctypes.c_void_p)]),
        "ks_search_resume": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_SearchParams), ctypes.POINTER(ctypes.c_void_p)]),
        "ks_result_destroy": (None, [ctypes.c_void_p]),
        "ks_result_json": (ctypes.c_char_p, [ctypes.c_void_p]),
        "ks_task_load": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
        "ks_task_destroy": (None, [ctypes.c_void_p]),
        "ks_task_json": (ctypes.c_char_p, [ctypes.c_void_p]),
        "ks_evaluator_create": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
        "ks_evaluator_destroy": (None, [ctypes.c_void_p]),
        "ks_evaluate": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p,
                                       ctypes.POINTER(ctypes.c_void_p)]),
        "ks_string_free": (None, [ctypes.c_void_p]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


_lib = None


def _c():
    global _lib
    if _lib is None:
        _lib = _load()
    return _lib


def _check(status: int) -> None:
    if status != 0:
        raise KsearchError(status, _c().ks_last_error_message().decode("utf-8", "replace"))


def _b(s: Optional[Union[str, bytes, os.PathLike]], name: str = "argument") -> Optional[bytes]:
    """`s` as a C string; `name` says which argument a TypeError or ValueError is about."""
    if s is None:
        return None
    if isinstance(s, str):
        b = s.encode()
    elif isinstance(s, (bytes, os.PathLike)):
        b = os.fsencode(s)
    else:
        raise TypeError(f"{name} must be a str or a path, not {type(s).__name__}")
    if b"\0" in b:  # ctypes would silently cut the string there
        raise ValueError(f"{name} contains a NUL character")
    return b


def _int(v: int, name: str, lo: int = -2**31, hi: int = 2**31 - 1) -> int:
    """`v` checked for a C int (or the given range): ctypes would silently wrap it."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, is {v}")
    return v


def version() -> str:
    return _c().ks_version_string().decode()


# ---- Results, tasks, evaluation --------------------------------------------

class Result:
    """The outcome of a search: best solution, its evaluation, totals, run folder."""

    def __init__(self, data: dict):
        self.data = data
        best = data.get("best")
        self.run_dir: str = data["run_dir"]
        self.stop_reason: str = data["stop_reason"]
        self.rounds: int = data["rounds"]
        self.best_solution: Optional[dict] = best["solution"] if best else None
        self.best_eval: Optional[dict] = best["eval"] if best else None
        self.best_latency_ms: Optional[float] = best["eval"]["latency_ms"] if best else None
        self.best_speedup: Optional[float] = best["eval"]["speedup"] if best else None
        self.llm_errors: list = []  # exceptions the llm function raised (each a failed generation)

    def __repr__(self) -> str:
        return (f"Result(stop_reason={self.stop_reason!r}, rounds={self.rounds}, "
                f"best_latency_ms={self.best_latency_ms}, run_dir={self.run_dir!r})")


class Task:
    def __init__(self, name_or_path: Union[str, os.PathLike]):
        if name_or_path is None:
            raise TypeError("name_or_path must be a task name or a path, not None")
        handle = ctypes.c_void_p()
        _check(_c().ks_task_load(_b(name_or_path, "name_or_path"), ctypes.byref(handle)))
        self._handle = handle
        self.spec: dict = json.loads(_c().ks_task_json(handle).decode())
        self.name: str = self.spec["name"]

    def __del__(self):
        if getattr(self, "_handle", None):
            _c().ks_task_destroy(self._handle)
            self._handle = None


def load_task(name_or_path: Union[str, os.PathLike]) -> Task:
    return Task(name_or_path)


class Evaluator:
    """Compiles, checks and times single solutions ("auto", "cuda" or "host")."""

    def __init__(self, backend: str = "auto"):
        handle = ctypes.c_void_p()
        _check(_c().ks_evaluator_create(_b(backend, "backend"), ctypes.byref(handle)))
        self._handle = handle

    def evaluate(self, task: Task, solution: str) -> dict:
        """`solution`: solution JSON or an LLM-style answer. Returns the evaluation as a dict."""
        if not isinstance(task, Task):
            raise TypeError(f"task must be a ksearch.Task (see load_task), not {type(task).__name__}")
        if not getattr(self, "_handle", None):
            raise ValueError("this Evaluator is closed")
        data = _b(solution, "solution")
        out = ctypes.c_void_p()
        _check(_c().ks_evaluate(self._handle, task._handle, data, ctypes.byref(out)))
        try:
            return json.loads(ctypes.cast(out, ctypes.c_char_p).value.decode())
        finally:
            _c().ks_string_free(out)

    def close(self) -> None:
        if getattr(self, "_handle", None):
            _c().ks_evaluator_destroy(self._handle)
            self._handle = None

    __del__ = close


# ---- Searching ----------------------------------------------------------------

LlmFunction = Callable[[str, str, str], str]          # (kind, system, prompt) -> answer text
ProgressFunction = Callable[[dict], Optional[bool]]    # return False to stop


def _check_llm(llm) -> None:
    if llm is not None and not callable(llm) and not isinstance(llm, str):
        raise TypeError("llm must be a function (kind, system, prompt) -> str or a name such as "
                        f"\"offline\" or \"replay:PATH\", not {type(llm).__name__}")


def _make_callbacks(llm: Optional[LlmFunction], progress: Optional[ProgressFunction], errors: list):
    llm_cb = _LLM_CALLBACK()
    progress_cb = _PROGRESS_CALLBACK()
    if llm is not None:
        def on_prompt(req_p, answer, _user):
            req = req_p.contents
            # Everything that can raise stays inside the try: an exception
            # leaving a ctypes callback is printed, dropped, and the C side
            # gets an undefined return value.
            try:
                text = llm(PROMPT_KINDS[req.kind], req.system.decode("utf-8", "replace"),
                           req.prompt.decode("utf-8", "replace"))
                if not isinstance(text, str):
                    raise TypeError("the llm function must return a str")
                data = text.encode()  # UnicodeEncodeError for a str holding lone surrogates
            except _StopSearch:
                return _KS_E_USER
            except Exception as e:  # a failing model is a failed generation, not a crash
                e._ksearch_from = "llm"
                errors.append(e)
                return 1
            except BaseException as e:  # Ctrl-C (KeyboardInterrupt), SystemExit: stop the run, raise it after
                e._ksearch_from = "interrupt"
                errors.append(e)
                return _KS_E_USER
            return _c().ks_llm_answer_set_text(answer, data, len(data))
        llm_cb = _LLM_CALLBACK(on_prompt)
    if progress is not None:
        def on_round(rep_p, _user):
            r = rep_p.contents
            report = {
                "round": r.round, "max_rounds": r.max_rounds,
                "action": (r.action or b"").decode(), "status": (r.status or b"").decode(),
                "solution_id": (r.solution_id or b"").decode(),
                "latency_ms": r.latency_ms, "best_latency_ms": r.best_latency_ms, "best_speedup": r.best_speedup,
                "improved": bool(r.improved), "replayed": bool(r.replayed),
                "elapsed_s": r.elapsed_s, "cost_usd": r.cost_usd,
            }
            try:
                return 0 if progress(report) is not False else 1
            except BaseException as e:  # KeyboardInterrupt too: it must stop the run, not vanish in ctypes
                e._ksearch_from = "progress"
                errors.append(e)
                return 1
        progress_cb = _PROGRESS_CALLBACK(on_round)
    return llm_cb, progress_cb


def _finish(status: int, handle: ctypes.c_void_p, errors: list) -> Result:
    try:
        if status not in (0, _KS_E_CANCELLED) or not handle:
            _check(status)
        result = Result(json.loads(_c().ks_result_json(handle).decode()))
    finally:
        if handle:
            _c().ks_result_destroy(handle)
    # A progress function that raised, or a KeyboardInterrupt or SystemExit in
    # the llm function, stopped the run: say why, loudly.
    for e in errors:
        if getattr(e, "_ksearch_from", "") in ("progress", "interrupt"):
            raise e
    # Exceptions from the llm function became failed generations; keep them visible.
    result.llm_errors = [e for e in errors if getattr(e, "_ksearch_from", "") == "llm"]
    return result


def run_search(task: Union[str, os.PathLike], *, llm: Union[str, LlmFunction] = "offline",
               strategy: Optional[str] = None, language: str = "cuda", max_rounds: int = 20,
               wm_stagnation_window: int = 5, wm_max_difficulty: int = 4, parallel: int = 1,
               tune_rounds: int = 0, seed: int = 0, max_cost_usd: float = 0.0, max_wall_s: float = 0.0,
               run_dir: Optional[Union[str, os.PathLike]] = None, model: Optional[str] = None,
               base_url: Optional[str] = None, api_key_env: Optional[str] = None,
               backend: str = "auto", in_process: bool = False, timing_cap_s: float = 0.0,
               progress: Optional[ProgressFunction] = None) -> Result:
    """Runs a search and returns its Result.

    `llm` is a function (kind, system, prompt) -> answer, or one of "offline",
    "openai" (with model/base_url), "replay:PATH", "command:PROGRAM ARGS".
    Raise ksearch.stop() inside the llm function, or return False from
    `progress`, to stop the run cleanly (it stays resumable).
    """
    _check_llm(llm)
    p = _SearchParams()
    _check(_c().ks_search_params_init(ctypes.byref(p), _SEARCH_PARAMS_VERSION))
    errors: list = []
    llm_cb, progress_cb = _make_callbacks(llm if callable(llm) else None, progress, errors)
    keep = []  # byte strings must outlive the call
    def s(v, name):
        b = _b(v, name)
        keep.append(b)
        return b
    p.task = s(task, "task")
    p.strategy = s(strategy or ("tune" if llm == "offline" else "world_model"), "strategy")
    p.language = s(language, "language")
    p.max_rounds = _int(max_rounds, "max_rounds")
    p.wm_stagnation_window = _int(wm_stagnation_window, "wm_stagnation_window")
    p.wm_max_difficulty = _int(wm_max_difficulty, "wm_max_difficulty")
    p.parallel, p.tune_rounds = _int(parallel, "parallel"), _int(tune_rounds, "tune_rounds")
    p.seed = _int(seed, "seed", 0, 2**64 - 1)
    p.max_cost_usd, p.max_wall_s = max_cost_usd, max_wall_s
    p.run_dir = s(run_dir, "run_dir")
    p.llm = None if callable(llm) else s(llm, "llm")
    p.model, p.base_url, p.api_key_env = s(model, "model"), s(base_url, "base_url"), s(api_key_env, "api_key_env")
    p.llm_callback, p.progress_callback = llm_cb, progress_cb
    p.backend, p.in_process = s(backend, "backend"), int(in_process)
    if timing_cap_s > 0:
        p.timing_cap_s = timing_cap_s
    handle = ctypes.c_void_p()
    status = _c().ks_search_run(ctypes.byref(p), ctypes.byref(handle))
    return _finish(status, handle, errors)


def resume_search(run_dir: Union[str, os.PathLike], *, max_rounds: int = 0,
                  llm: Optional[Union[str, LlmFunction]] = None,
                  progress: Optional[ProgressFunction] = None) -> Result:
    """Resumes a run folder; the recorded answers and evaluations are replayed."""
    _check_llm(llm)
    p = _SearchParams()
    _check(_c().ks_search_params_init(ctypes.byref(p), _SEARCH_PARAMS_VERSION))
    errors: list = []
    llm_cb, progress_cb = _make_callbacks(llm if callable(llm) else None, progress, errors)
    llm_b = None if llm is None or callable(llm) else _b(llm, "llm")
    p.max_rounds = _int(max_rounds, "max_rounds")
    p.llm = llm_b
    p.llm_callback, p.progress_callback = llm_cb, progress_cb
    handle = ctypes.c_void_p()
    status = _c().ks_search_resume(_b(run_dir, "run_dir"), ctypes.byref(p), ctypes.byref(handle))
    return _finish(status, handle, errors)


def stop() -> None:
    """Call from inside an llm function to stop the search after this round."""
    raise _StopSearch()
