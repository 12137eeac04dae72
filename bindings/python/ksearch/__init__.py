"""libksearch from Python: LLM-driven GPU kernel search, over the library's C ABI.

    import ksearch

    # Tune a task's declared parameters, no model needed:
    res = ksearch.run_search("examples/tasks/softmax", llm=ksearch.LlmOptions.offline(),
                             budget={"max_rounds": 12})

    # Bring your own model:
    def my_model(req: ksearch.LlmRequest) -> str:
        return call_my_llm(req.system, req.prompt)
    res = ksearch.run_search("gpumode/trimul", llm=ksearch.LlmOptions.from_callback(my_model))
    print(res.best_latency_ms, res.run_dir)

Install with `pip install ./bindings/python` (distribution libksearch): the
library and its worker are built into the package; no environment variable
is needed. docs/python.md describes the API.
"""

from __future__ import annotations

from ._lib import KsearchError, library_path
from ._abi import (ApiKind, Backend, CommandInput, EvalStatus, Language, LlmSource, PromptKind, ReplayDivergence,
                   SandboxMode, Status, Strategy, TimingMode)
from ._lib import c as _c
from .evaluate import Evaluator, Task, load_task
from .kernel import Kernel, TensorInfo
from .log import LogLevel, log_level, set_log_callback, set_log_level
from .options import (BudgetOptions, EvalOptions, EvolveOptions, KernelLoadOptions, LlmOptions, ReplayOptions,
                      ResumeOptions, SearchOptions, TuneOptions, WorldModelOptions, search_settings)
from .search import (CallbackError, CancelToken, EvalRequest, EvalResult, Event, LlmAnswer, LlmFailure, LlmRequest,
                     Result, RoundReport, replay_search, resume_search, run_search, stop, threaded_batch)

__all__ = [
    "KsearchError", "CallbackError", "version", "library_path",
    "ApiKind", "Backend", "CommandInput", "EvalStatus", "Language", "LlmSource", "PromptKind", "ReplayDivergence",
    "SandboxMode", "Status", "Strategy", "TimingMode",
    "BudgetOptions", "WorldModelOptions", "TuneOptions", "EvolveOptions", "EvalOptions", "LlmOptions",
    "SearchOptions", "search_settings",
    "ResumeOptions", "ReplayOptions", "KernelLoadOptions",
    "LlmRequest", "LlmAnswer", "LlmFailure", "EvalRequest", "EvalResult", "RoundReport", "Event",
    "CancelToken", "Result", "run_search", "resume_search", "replay_search", "stop", "threaded_batch",
    "Task", "Evaluator", "load_task", "Kernel", "TensorInfo",
    "LogLevel", "set_log_callback", "set_log_level", "log_level",
]


def version() -> str:
    """The loaded library's version, e.g. "0.1.0"."""
    return str(_c().ks_version_string().decode())
