"""Running a search from Python, with Python parts: a model, an evaluator,
progress and event listeners, and a cancel token.

What each callback receives and returns:

    llm.callback(LlmRequest) -> str | LlmAnswer
    llm.batch_callback(list[LlmRequest]) -> list[str | LlmAnswer | Exception]   (same order)
    eval.callback(EvalRequest) -> EvalResult | dict | str (a result JSON)
    eval.batch_callback(list[EvalRequest]) -> list[...]                          (same order)
    progress(RoundReport) -> None | bool     (False stops the run after this round)
    event(Event) -> None                     (every event as it is journalled)

Errors never cross into C. Raising ksearch.LlmFailure in a model callback (or
returning LlmAnswer(error=...)) is a failed generation: the search goes on,
as it does when an HTTP model fails. ksearch.stop() inside any callback stops
the run cleanly (the Result says "cancelled"). Any other exception stops the
run too, and run_search then raises ksearch.CallbackError from it (with the
run's result attached; the run folder stays resumable); KeyboardInterrupt and
SystemExit are raised again as they are.

Every callback is called on the thread that called run_search, one at a
time. A batch callback may hand its items to threads (threaded_batch does)
and must have them all answered when it returns.
"""

from __future__ import annotations

import ctypes
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ._abi import EvalStatus, Language, PromptKind, Status
from ._lib import KsearchError, OwnedHandle, abi, c, check, text, to_bytes
from .options import PathLike, ReplayOptions, ResumeOptions, SearchOptions, _Keep

__all__ = ["LlmRequest", "LlmAnswer", "LlmFailure", "EvalRequest", "EvalResult", "RoundReport", "Event",
           "CancelToken", "Result", "CallbackError", "run_search", "resume_search", "replay_search", "stop",
           "threaded_batch"]


# ---- What callbacks receive and return ------------------------------------------

@dataclass(frozen=True)
class LlmRequest:
    """One prompt: why it is sent, the system message and the user message."""
    kind: PromptKind
    system: str
    prompt: str


@dataclass
class LlmAnswer:
    """An answer with its usage (it counts against budget.max_cost_usd), or a
    failure the run journals (`error`; the search goes on)."""
    text: Optional[str] = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    error: Optional[str] = None


class LlmFailure(Exception):
    """Raised by a model callback: this prompt failed (the search goes on)."""


@dataclass(frozen=True)
class EvalRequest:
    """One candidate for a Python evaluator (ks_eval_request)."""
    task_name: str
    task_json: str
    solution_json: str
    solution_id: str
    language: Language
    # What the library asks of this evaluation (ks_eval_request_options_json):
    # the fields of EvalOptions, "only_workloads" among them.
    options_json: str = "{}"

    @property
    def options(self) -> Dict[str, Any]:
        options: Dict[str, Any] = json.loads(self.options_json)
        return options

    @property
    def task(self) -> Dict[str, Any]:
        task: Dict[str, Any] = json.loads(self.task_json)
        return task

    @property
    def solution(self) -> Dict[str, Any]:
        solution: Dict[str, Any] = json.loads(self.solution_json)
        return solution


@dataclass
class EvalResult:
    """A summary evaluation: the status, latencies in ms (0 = unknown; the
    latency must be > 0 when passed) and a log the model sees on failure."""
    status: Union[EvalStatus, str]
    latency_ms: float = 0.0
    reference_latency_ms: float = 0.0
    log: Optional[str] = None


@dataclass(frozen=True)
class RoundReport:
    """After every round (ks_round_report)."""
    round: int
    max_rounds: int
    action: str
    status: EvalStatus
    solution_id: str
    latency_ms: float
    best_latency_ms: float
    best_speedup: float
    improved: bool
    replayed: bool
    elapsed_s: float
    cost_usd: float


@dataclass(frozen=True)
class Event:
    """A run event as it is written to events.jsonl."""
    seq: int
    type: str
    json: str

    @property
    def data(self) -> Dict[str, Any]:
        data: Dict[str, Any] = json.loads(self.json)
        return data


class _Stop(Exception):
    pass


def stop() -> None:
    """Call inside any callback to stop the search cleanly (stop_reason "cancelled")."""
    raise _Stop()


class CallbackError(KsearchError):
    """A Python callback raised: the run stopped. `__cause__` is the exception,
    `result` the run's result so far (its folder stays resumable)."""

    def __init__(self, where: str, exc: BaseException, result: Optional["Result"]):
        super().__init__(int(Status.E_USER), f"the {where} raised {type(exc).__name__}: {exc}")
        self.where = where
        self.result = result


# ---- Handles --------------------------------------------------------------------------

class CancelToken:
    """Stops the runs that carry it promptly (an LLM request and an evaluation
    in flight are aborted). cancel() is safe from any thread."""

    def __init__(self) -> None:
        h = ctypes.c_void_p()
        check(c().ks_cancel_token_create(ctypes.byref(h)))
        self._handle: Optional[ctypes.c_void_p] = h

    def cancel(self) -> None:
        c().ks_cancel_token_cancel(self._live())

    @property
    def cancelled(self) -> bool:
        return bool(c().ks_cancel_token_is_cancelled(self._live()))

    def _live(self) -> ctypes.c_void_p:
        if not self._handle:
            raise ValueError("this CancelToken is closed")
        return self._handle

    def close(self) -> None:
        if getattr(self, "_handle", None):
            c().ks_cancel_token_destroy(self._handle)
            self._handle = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


class Result(OwnedHandle):
    """The outcome of a search. Holds the C result (for Kernel.load); close()
    it, or use it as a context manager, to release it early."""

    _destroy = "ks_result_destroy"

    def __init__(self, handle: ctypes.c_void_p):
        self._handle: Optional[ctypes.c_void_p] = handle
        lib = c()
        self.data: Dict[str, Any] = json.loads(text(lib.ks_result_json(handle)))
        self.run_dir: str = text(lib.ks_result_run_dir(handle))
        self.task: str = text(lib.ks_result_task(handle))
        self.stop_reason: str = text(lib.ks_result_stop_reason(handle))
        self.rounds: int = lib.ks_result_rounds(handle)
        self.has_best: bool = bool(lib.ks_result_has_best(handle))
        self.best_round: Optional[int] = lib.ks_result_best_round(handle) if self.has_best else None
        self.best_latency_ms: Optional[float] = lib.ks_result_best_latency_ms(handle) if self.has_best else None
        self.best_speedup: Optional[float] = lib.ks_result_best_speedup(handle) if self.has_best else None
        self.best_solution_id: Optional[str] = text(lib.ks_result_best_solution_id(handle)) or None
        self.best_solution: Optional[Dict[str, Any]] = (
            json.loads(text(lib.ks_result_best_solution_json(handle))) if self.has_best else None)
        self.launch_plan: Optional[Dict[str, Any]] = (
            json.loads(text(lib.ks_result_launch_plan_json(handle))) if self.has_best else None)
        self.sources: Dict[str, str] = {
            text(lib.ks_result_source_path(handle, i)): text(lib.ks_result_source_content(handle, i))
            for i in range(lib.ks_result_source_count(handle))}
        # The weak-check detection's report as manifest.json records it
        # ("status": ok, weak, weak_workloads or skipped); None for runs without one.
        self.weak_check: Optional[Dict[str, Any]] = self.data.get("weak_check")

    def __repr__(self) -> str:
        return (f"Result(task={self.task!r}, stop_reason={self.stop_reason!r}, rounds={self.rounds}, "
                f"best_latency_ms={self.best_latency_ms}, run_dir={self.run_dir!r})")


# ---- The bridge: Python callables as C callbacks ------------------------------------

class _Run:
    """One run's callbacks: wraps each Python function for C and keeps the
    first exception that must stop the run."""

    def __init__(self, cancel: Optional[CancelToken]):
        self.error: Optional[BaseException] = None
        self.error_where = ""
        self.cancel = cancel

    def fail(self, where: str, e: BaseException) -> None:
        if self.error is None:
            self.error, self.error_where = e, where
        if self.cancel is not None:  # also stops what no return value can (events, batch siblings)
            self.cancel.cancel()

    def wrap(self, struct: str, field: str, fn: Callable[..., Any]) -> Any:
        key = (struct, field)
        if key in (("ks_llm_options", "callback"),):
            return abi.ks_llm_callback(self._llm_one(fn))
        if key in (("ks_llm_options", "batch_callback"),):
            return abi.ks_llm_batch_callback(self._llm_batch(fn))
        if key == ("ks_eval_options", "callback") or field == "eval_callback":
            return abi.ks_evaluate_callback(self._eval_one(fn))
        if key == ("ks_eval_options", "batch_callback") or field == "eval_batch_callback":
            return abi.ks_evaluate_batch_callback(self._eval_batch(fn))
        if field == "progress":
            return abi.ks_progress_callback(self._progress(fn))
        if field == "event":
            return abi.ks_event_callback(self._event(fn))
        raise TypeError(f"{struct}.{field}: no Python bridge for this callback")

    # Each C-callable function below catches everything: an exception leaving
    # a ctypes callback is printed and lost, and C would see garbage.

    def _llm_one(self, fn: Callable[[LlmRequest], Any]) -> Callable[..., int]:
        def cb(req_p: Any, answer: int, _user: Any) -> int:
            try:
                try:
                    out = fn(_llm_request(req_p.contents))
                except LlmFailure as e:
                    out = LlmAnswer(error=str(e) or "LlmFailure")
                _set_llm_answer(answer, out, "the LLM callback")
                return 0
            except _Stop:
                return int(Status.E_USER)
            except BaseException as e:
                self.fail("LLM callback", e)
                return int(Status.E_USER)
        return cb

    def _llm_batch(self, fn: Callable[[List[LlmRequest]], Any]) -> Callable[..., int]:
        def cb(reqs_p: Any, answers_p: Any, count: int, _user: Any) -> int:
            try:
                reqs = [_llm_request(reqs_p[i]) for i in range(count)]
                outs = _batch_outputs(fn(reqs), count, "the LLM batch callback")
                for i, out in enumerate(outs):
                    if isinstance(out, BaseException):
                        out = LlmAnswer(error=f"{type(out).__name__}: {out}")
                    _set_llm_answer(answers_p[i], out, f"the LLM batch callback's answer {i}")
                return 0
            except LlmFailure as e:  # the whole call failed: every prompt is a failed generation
                for i in range(count):
                    _set_llm_answer(answers_p[i], LlmAnswer(error=str(e) or "LlmFailure"), "the LLM batch callback")
                return 0
            except _Stop:
                return int(Status.E_USER)
            except BaseException as e:
                self.fail("LLM batch callback", e)
                return int(Status.E_USER)
        return cb

    def _eval_one(self, fn: Callable[[EvalRequest], Any]) -> Callable[..., int]:
        def cb(req_p: Any, answer: int, _user: Any) -> int:
            try:
                _set_eval_answer(answer, fn(_eval_request(req_p.contents)), "the evaluator callback")
                return 0
            except _Stop:
                return int(Status.E_USER)
            except BaseException as e:
                self.fail("evaluator callback", e)
                return int(Status.E_USER)
        return cb

    def _eval_batch(self, fn: Callable[[List[EvalRequest]], Any]) -> Callable[..., int]:
        def cb(reqs_p: Any, answers_p: Any, count: int, _user: Any) -> int:
            try:
                reqs = [_eval_request(reqs_p[i]) for i in range(count)]
                outs = _batch_outputs(fn(reqs), count, "the evaluator batch callback")
                for i, out in enumerate(outs):
                    _set_eval_answer(answers_p[i], out, f"the evaluator batch callback's result {i}")
                return 0
            except _Stop:
                return int(Status.E_USER)
            except BaseException as e:
                self.fail("evaluator batch callback", e)
                return int(Status.E_USER)
        return cb

    def _progress(self, fn: Callable[[RoundReport], Any]) -> Callable[..., int]:
        def cb(rep_p: Any, _user: Any) -> int:
            try:
                r = rep_p.contents
                report = RoundReport(r.round, r.max_rounds, text(r.action), EvalStatus(r.status),
                                     text(r.solution_id), r.latency_ms, r.best_latency_ms, r.best_speedup,
                                     bool(r.improved), bool(r.replayed), r.elapsed_s, r.cost_usd)
                return 1 if fn(report) is False else 0
            except _Stop:
                return 1
            except BaseException as e:
                self.fail("progress callback", e)
                return 1
        return cb

    def _event(self, fn: Callable[[Event], Any]) -> Callable[..., None]:
        def cb(ev_p: Any, _user: Any) -> None:
            try:
                e = ev_p.contents
                fn(Event(e.seq, text(e.type), text(e.json)))
            except _Stop:
                if self.cancel is not None:
                    self.cancel.cancel()
            except BaseException as e:
                self.fail("event callback", e)
        return cb


def _llm_request(r: Any) -> LlmRequest:
    return LlmRequest(PromptKind(r.kind), text(r.system), text(r.prompt))


def _eval_request(r: Any) -> EvalRequest:
    options = c().ks_eval_request_options_json(ctypes.byref(r))
    return EvalRequest(text(r.task_name), text(r.task_json), text(r.solution_json), text(r.solution_id),
                       Language(r.language), text(options) if options else "{}")


def _batch_outputs(outs: Any, count: int, where: str) -> List[Any]:
    if isinstance(outs, (str, bytes)) or not isinstance(outs, Sequence):
        raise TypeError(f"{where} must return a list of {count} answers, not {type(outs).__name__}")
    if len(outs) != count:
        raise ValueError(f"{where} returned {len(outs)} answers for {count} requests")
    return list(outs)


def _set_llm_answer(answer: int, out: Any, where: str) -> None:
    lib = c()
    if isinstance(out, str):
        out = LlmAnswer(text=out)
    if not isinstance(out, LlmAnswer):
        raise TypeError(f"{where} must return a str or a ksearch.LlmAnswer, not {type(out).__name__}")
    # A refused or cut-off call may still have been paid for: usage counts either way.
    if out.input_tokens or out.output_tokens or out.cost_usd:
        check(lib.ks_llm_answer_set_usage(answer, out.input_tokens, out.output_tokens, float(out.cost_usd)))
    if out.error is not None:
        check(lib.ks_llm_answer_set_error(answer, _message(out.error)))
        return
    if out.text is None:
        raise ValueError(f"{where}: an LlmAnswer needs text or error")
    data = out.text.encode()  # UnicodeEncodeError for lone surrogates: a clear error of the run
    check(lib.ks_llm_answer_set_text(answer, data, len(data)))


def _message(s: str) -> bytes:
    """A log message for C: any str, NULs and lone surrogates escaped."""
    return str(s).replace("\0", "\\0").encode("utf-8", "backslashreplace")


def _set_eval_answer(answer: int, out: Any, where: str) -> None:
    lib = c()
    if isinstance(out, dict):
        out = json.dumps(out)
    if isinstance(out, str):
        check(lib.ks_eval_answer_set_json(answer, to_bytes(out, "the result JSON")))
    elif isinstance(out, EvalResult):
        status = out.status if isinstance(out.status, EvalStatus) else EvalStatus(out.status)  # type: ignore[arg-type]
        check(lib.ks_eval_answer_set_result(answer, int(status), float(out.latency_ms),
                                            float(out.reference_latency_ms),
                                            None if out.log is None else _message(out.log)))
    else:
        raise TypeError(f"{where} must return a ksearch.EvalResult, a dict or a JSON str, not {type(out).__name__}")


def threaded_batch(fn: Callable[[LlmRequest], Any], max_workers: int) -> Callable[[List[LlmRequest]], List[Any]]:
    """A batch callback that answers every prompt of a step with `fn` on up
    to `max_workers` threads at once (a model client that waits on the
    network releases the GIL). A prompt whose call raised gets that
    exception as its answer: a failed generation."""
    if max_workers < 1:
        raise ValueError(f"max_workers must be at least 1, is {max_workers}")

    def batch(requests: List[LlmRequest]) -> List[Any]:
        def one(r: LlmRequest) -> Any:
            try:
                return fn(r)
            except _Stop:
                raise  # stop() ends the run, not this prompt (pool.map raises it on the callback's thread)
            except Exception as e:
                return e
        with ThreadPoolExecutor(max_workers=min(max_workers, max(1, len(requests)))) as pool:
            return list(pool.map(one, requests))
    return batch


# ---- Running ----------------------------------------------------------------------------

def _run(fill: Callable[[_Keep, _Run], Any], call: Callable[[Any, Any], int], cancel: Optional[CancelToken]) -> Result:
    own = cancel is None
    token = CancelToken() if own else cancel
    run = _Run(token)
    keep = _Keep()
    try:
        struct = fill(keep, run)
        handle = ctypes.c_void_p()
        status = call(struct, handle)
        result = Result(handle) if handle else None
        if run.error is not None:
            if isinstance(run.error, (KeyboardInterrupt, SystemExit)):
                raise run.error
            raise CallbackError(run.error_where, run.error, result) from run.error
        if status not in (0, int(Status.E_CANCELLED)) or result is None:
            check(status if status != 0 else int(Status.E_INTERNAL))
        assert result is not None
        return result
    finally:
        del keep
        if own and token is not None:
            token.close()


def _token(t: Any) -> Optional[CancelToken]:
    if t is not None and not isinstance(t, CancelToken):
        raise TypeError(f"cancel must be a ksearch.CancelToken, not {type(t).__name__}")
    return t


def _apply(opts: Any, fields: Dict[str, Any], progress: Optional[Callable[[RoundReport], Any]],
           event: Optional[Callable[[Event], Any]]) -> None:
    """Keyword fields, then the progress and event callbacks, onto an options copy."""
    for k, v in fields.items():
        setattr(opts, k, v)
    if progress is not None:
        opts.progress = progress
    if event is not None:
        opts.event = event


def _run_with(opts: Any, cancel: Optional[CancelToken], call: Callable[[Any, Any], int]) -> Result:
    """Runs `call` (ks_search_run/resume/replay) on the C struct of `opts`."""
    token = _token(cancel if cancel is not None else opts.cancel)

    def fill(keep: _Keep, run: _Run) -> Any:
        s = opts._c_defaults()
        opts._fill(s, keep, run.wrap, "")
        s.cancel = run.cancel._live() if run.cancel else None
        return s
    return _run(fill, call, token)


def run_search(task_or_options: Union[str, "os.PathLike[str]", SearchOptions, None] = None, /, *,
               progress: Optional[Callable[[RoundReport], Any]] = None,
               event: Optional[Callable[[Event], Any]] = None,
               cancel: Optional[CancelToken] = None, **fields: Any) -> Result:
    """Runs a search to its end and returns its Result (stop_reason
    "cancelled" when a callback or `cancel` stopped it).

    The first argument is a task (name or path) or a SearchOptions; keyword
    arguments set SearchOptions fields (nested ones as option objects or
    dicts) or the library's settings by name (ksearch.search_settings(),
    docs/options.md) on a copy:

        run_search("examples/tasks/softmax", llm=LlmOptions.offline(), budget={"max_rounds": 8})
        run_search("examples/tasks/softmax", llm=LlmOptions.offline(), tune_batch=2)
    """
    if isinstance(task_or_options, SearchOptions):
        opts = task_or_options.copy()  # the caller's object is left as it was
    elif task_or_options is None or isinstance(task_or_options, (str, os.PathLike)):
        opts = SearchOptions()
        if task_or_options is not None:
            opts.task = os.fspath(task_or_options)
    else:
        raise TypeError(f"the first argument must be a task or a ksearch.SearchOptions, "
                        f"not {type(task_or_options).__name__}")
    assert isinstance(opts, SearchOptions)
    _apply(opts, fields, progress, event)
    if opts.task is None:
        raise ValueError("run_search needs a task")
    return _run_with(opts, cancel, lambda s, h: c().ks_search_run(ctypes.byref(s), ctypes.byref(h)))


def resume_search(run_dir: PathLike, options: Optional[ResumeOptions] = None, /, *,
                  progress: Optional[Callable[[RoundReport], Any]] = None,
                  event: Optional[Callable[[Event], Any]] = None,
                  cancel: Optional[CancelToken] = None, **fields: Any) -> Result:
    """Resumes a run folder: its journal is replayed (nothing is asked or
    measured twice) and the search goes on. Keyword arguments set
    ResumeOptions fields (max_rounds, llm, eval_callback, ...)."""
    opts = options.copy() if options is not None else ResumeOptions()
    assert isinstance(opts, ResumeOptions)
    _apply(opts, fields, progress, event)
    dir_b = to_bytes(run_dir, "run_dir")
    return _run_with(opts, cancel, lambda s, h: c().ks_search_resume(dir_b, ctypes.byref(s), ctypes.byref(h)))


def replay_search(recorded_run_dir: PathLike, options: Optional[ReplayOptions] = None, /, *,
                  progress: Optional[Callable[[RoundReport], Any]] = None,
                  event: Optional[Callable[[Event], Any]] = None,
                  cancel: Optional[CancelToken] = None, **fields: Any) -> Result:
    """Reproduces a run folder into a new one from its recorded answers and
    evaluations (no model, no GPU), with settings changed or not (`ksearch
    replay`). Keyword arguments set ReplayOptions fields (run_dir,
    config_changes_json, on_divergence, llm to go on live, ...)."""
    opts = options.copy() if options is not None else ReplayOptions()
    assert isinstance(opts, ReplayOptions)
    _apply(opts, fields, progress, event)
    dir_b = to_bytes(recorded_run_dir, "recorded_run_dir")
    return _run_with(opts, cancel, lambda s, h: c().ks_search_replay(dir_b, ctypes.byref(s), ctypes.byref(h)))
