"""The option structs of the C ABI as Python classes.

Every field of ks_search_options and its nested structs (budget, world model,
tune, evolve, evaluation, LLM), of ks_resume_options and of ks_kernel_load_options is
an attribute of the same name here, with three exceptions that follow from
Python having lists and closures: a pointer-and-count pair is one list
(`headers`, `devices`, `command_argv`), `user_data` fields do not exist (a
callback is any Python callable), and callbacks take Python functions
(ksearch.search says what they receive). Enum fields take the enum or its
name ("greedy"); booleans are bools.

The defaults are not written here: a new object holds what the C init
function (ks_*_options_init) sets, read back from the struct, so Python and C
never disagree.

    opts = SearchOptions(task="examples/tasks/softmax", strategy="tune")
    opts.budget.max_rounds = 12
    opts.llm = LlmOptions.offline()
"""

from __future__ import annotations

import ctypes
import json
import math
import os
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple, Union

from ._lib import abi, c, check, to_bytes
from ._abi import (ApiKind, Backend, CommandInput, Language, LlmSource, ReplayDivergence, SandboxMode, Strategy,
                   TimingMode)

__all__ = ["BudgetOptions", "WorldModelOptions", "TuneOptions", "EvolveOptions", "EvalOptions", "LlmOptions",
           "SearchOptions", "ResumeOptions", "ReplayOptions", "KernelLoadOptions", "PathLike", "search_settings"]

PathLike = Union[str, "os.PathLike[str]"]

_INT_RANGES = {
    "int": (-2**31, 2**31 - 1), "int64_t": (-2**63, 2**63 - 1), "uint64_t": (0, 2**64 - 1),
    "uint32_t": (0, 2**32 - 1), "size_t": (0, 2**64 - 1),
}


class _Keep:
    """Everything a filled C struct points to (byte strings, arrays, callback
    thunks): it must stay alive until the C call that uses the struct returns."""

    def __init__(self) -> None:
        self.items: List[Any] = []

    def __call__(self, x: Any) -> Any:
        self.items.append(x)
        return x


# What a callback field becomes in C: the run (ksearch.search) knows how to
# wrap each kind of Python function and where its errors go.
CallbackWrapper = Callable[[str, str, Callable[..., Any]], Any]


class _Options:
    """A Python view of one C option struct; see the module's docstring."""

    _struct: ClassVar[str]           # the C struct's name
    _init: ClassVar[str]             # its init function
    _version: ClassVar[str]          # the #define of its version
    _nested: ClassVar[Dict[str, Any]] = {}   # struct fields (by value or pointer) -> option class
    _bools: ClassVar[Tuple[str, ...]] = ()
    _callbacks: ClassVar[Tuple[str, ...]] = ()
    _special: ClassVar[Tuple[str, ...]] = ()  # set by the class itself (pointers to handles)

    def __init__(self, **fields: Any) -> None:
        self._read(self._c_defaults())
        for k, v in fields.items():
            setattr(self, k, v)

    # -- C side -----------------------------------------------------------------
    @classmethod
    def _c_struct(cls) -> Any:
        return getattr(abi, cls._struct)

    @classmethod
    def _c_defaults(cls) -> Any:
        s = cls._c_struct()()
        check(getattr(c(), cls._init)(ctypes.byref(s), getattr(abi, cls._version)))
        return s

    @classmethod
    def _layout(cls) -> List[Tuple[str, str, Optional[str]]]:
        """(python name, C type as spelled, count field or None) for each exposed field."""
        cached = cls.__dict__.get("_layout_cache")
        if cached is None:
            cached = cls._compute_layout()
            setattr(cls, "_layout_cache", cached)
        return cached

    @classmethod
    def _compute_layout(cls) -> List[Tuple[str, str, Optional[str]]]:
        fields = abi.STRUCT_FIELDS[cls._struct]
        out = []
        skip = set()
        for i, (name, ctype) in enumerate(fields):
            if name == "version" or name in skip or name.endswith("user_data"):
                continue
            count = None
            if ctype.endswith("*") and ctype.replace(" ", "") not in ("constchar*",) and i + 1 < len(fields) \
                    and fields[i + 1][1] == "size_t":
                count = fields[i + 1][0]
                skip.add(count)
            out.append((name, ctype, count))
        return out

    def _read(self, s: Any) -> None:
        for name, ctype, count in self._layout():
            value = getattr(s, name)
            if name in self._callbacks or name in self._special:
                v: Any = None
            elif name in self._nested:
                if ctype.endswith("*"):
                    v = None  # a pointer to options: NULL (unset) after init
                else:
                    v = self._nested[name]._from_c(value)
            elif count is not None:
                n = getattr(s, count)
                v = [value[i].decode() if isinstance(value[i], bytes) else value[i] for i in range(n)] if n else []
            elif ctype.endswith("char *"):
                v = value.decode() if value is not None else None
            elif ctype in abi.ENUMS:
                v = abi.ENUMS[ctype](value)
            elif name in self._bools:
                v = bool(value)
            else:
                v = value
            object.__setattr__(self, name, v)

    @classmethod
    def _from_c(cls, s: Any) -> "_Options":
        o = cls.__new__(cls)
        o._read(s)
        return o

    def _fill(self, s: Any, keep: _Keep, wrap: Optional[CallbackWrapper], path: str) -> None:
        """Writes this object into the C struct `s` (already initialised)."""
        for name, ctype, count in self._layout():
            value = getattr(self, name)
            where = f"{path}.{name}" if path else name
            if name in self._special:
                continue
            if name in self._callbacks:
                if value is None:
                    continue
                if not callable(value):
                    raise TypeError(f"{where} must be a function, not {type(value).__name__}")
                if wrap is None:
                    raise ValueError(f"{where}: callbacks are only used by a search")
                setattr(s, name, keep(wrap(self._struct, name, value)))
            elif name in self._nested:
                if value is None:
                    continue
                opt_cls = self._nested[name]
                if not isinstance(value, opt_cls):
                    raise TypeError(f"{where} must be a ksearch.{opt_cls.__name__}, not {type(value).__name__}")
                if ctype.endswith("*"):
                    sub = keep(value._c_defaults())
                    value._fill(sub, keep, wrap, where)
                    setattr(s, name, ctypes.pointer(sub))
                else:
                    value._fill(getattr(s, name), keep, wrap, where)
            elif count is not None:
                if value is None:
                    value = []
                if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                    raise TypeError(f"{where} must be a list, not {type(value).__name__}")
                arr: Any
                if ctype.startswith("const char"):
                    arr = (ctypes.c_char_p * max(len(value), 1))(
                        *[to_bytes(v, f"{where}[{i}]") for i, v in enumerate(value)])
                else:
                    arr = (ctypes.c_int * max(len(value), 1))(
                        *[_int(v, f"{where}[{i}]", "int") for i, v in enumerate(value)])
                keep(arr)
                setattr(s, name, ctypes.cast(arr, type(getattr(s, name))) if value else None)
                setattr(s, count, len(value))
            elif ctype.endswith("char *"):
                if isinstance(value, dict) and name.endswith("_json"):
                    value = json.dumps(value)
                setattr(s, name, keep(to_bytes(value, where)))
            elif ctype in abi.ENUMS:
                setattr(s, name, int(_enum(abi.ENUMS[ctype], value, where)))
            elif name in self._bools:
                if not isinstance(value, (bool, int)):
                    raise TypeError(f"{where} must be a bool, not {type(value).__name__}")
                setattr(s, name, 1 if value else 0)
            elif ctype == "double":
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise TypeError(f"{where} must be a number, not {type(value).__name__}")
                if math.isnan(value):
                    raise ValueError(f"{where} is NaN")
                setattr(s, name, float(value))
            elif ctype in _INT_RANGES:
                setattr(s, name, _int(value, where, ctype))
            else:
                raise TypeError(f"{where}: the C type {ctype} has no Python conversion")

    # -- Python side ------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        if name not in {n for n, _, _ in self._layout()}:
            raise AttributeError(f"{type(self).__name__} has no option \"{name}\" "
                                 f"(options: {', '.join(self.fields())})")
        if name in self._nested and isinstance(value, dict):
            value = self._nested[name](**value)
        ctype = dict((n, t) for n, t, _ in self._layout())[name]
        if ctype in abi.ENUMS and value is not None:
            value = _enum(abi.ENUMS[ctype], value, name)
        object.__setattr__(self, name, value)

    @classmethod
    def fields(cls) -> List[str]:
        """The option names, in the C struct's order."""
        return [n for n, _, _ in cls._layout()]

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for n in self.fields():
            v = getattr(self, n)
            out[n] = v.to_dict() if isinstance(v, _Options) else v
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.to_dict().items())})"

    def copy(self) -> "_Options":
        """A copy whose nested options are copies too (callables are shared)."""
        o = type(self).__new__(type(self))
        for n in self.fields():
            v = getattr(self, n)
            object.__setattr__(o, n, v.copy() if isinstance(v, _Options) else list(v) if isinstance(v, list) else v)
        return o

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Options) and type(other) is type(self) and self.to_dict() == other.to_dict()


def _int(v: Any, where: str, ctype: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{where} must be an int, not {type(v).__name__}")
    lo, hi = _INT_RANGES[ctype]
    if not lo <= v <= hi:
        raise ValueError(f"{where} must be between {lo} and {hi}, is {v}")  # ctypes would wrap it
    return v


def _enum(cls: Any, v: Any, where: str) -> Any:
    if isinstance(v, cls):
        return v
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise TypeError(f"{where} must be a ksearch.{cls.__name__} or its name, not {type(v).__name__}")
    return cls(v)


class BudgetOptions(_Options):
    """When the search stops (ks_budget_options)."""
    _struct, _init, _version = "ks_budget_options", "ks_budget_options_init", "KS_BUDGET_OPTIONS_VERSION"
    max_rounds: int
    max_cost_usd: float
    max_wall_s: float
    max_answer_bytes: int


class WorldModelOptions(_Options):
    """The world model of the world_model strategy (ks_world_model_options).
    `lenient_edits=True` repairs an edit answer that breaks a rule where that
    is safe, instead of rejecting it (docs/world-model.md, "Lenient edits")."""
    _struct, _init, _version = ("ks_world_model_options", "ks_world_model_options_init",
                                "KS_WORLD_MODEL_OPTIONS_VERSION")
    _bools = ("lenient_edits",)
    stagnation_window: int
    max_difficulty: int
    edit_retries: int
    max_chars: int
    lenient_edits: bool


class TuneOptions(_Options):
    """Parameter tuning after an LLM search (ks_tune_options)."""
    _struct, _init, _version = "ks_tune_options", "ks_tune_options_init", "KS_TUNE_OPTIONS_VERSION"
    rounds: int


class EvolveOptions(_Options):
    """The evolve strategy's islands, migration and elite archive (ks_evolve_options)."""
    _struct, _init, _version = "ks_evolve_options", "ks_evolve_options_init", "KS_EVOLVE_OPTIONS_VERSION"
    islands: int
    island_size: int
    migration_interval: int
    migration_size: int
    archive_size: int
    inspirations: int
    exploit_ratio: float


class EvalOptions(_Options):
    """How candidates are evaluated (ks_eval_options). `callback` (one
    candidate) or `batch_callback` (several) hand every candidate to Python
    instead of the built-in evaluator; see ksearch.EvalRequest."""
    _struct, _init, _version = "ks_eval_options", "ks_eval_options_init", "KS_EVAL_OPTIONS_VERSION"
    _bools = ("in_process",)
    _callbacks = ("callback", "batch_callback")
    backend: Backend
    devices: List[int]
    in_process: bool
    cache_dir: Optional[PathLike]
    cuda_arch: Optional[str]
    sandbox: SandboxMode
    memory_limit_bytes: int
    timing_cap_s: float
    seeds: int
    compile_timeout_s: float
    run_timeout_s: float
    compile_workers: int
    worker_path: Optional[PathLike]
    baseline_latencies_path: Optional[PathLike]
    options_json: Optional[Union[str, Dict[str, Any]]]
    callback: Optional[Callable[..., Any]]
    batch_callback: Optional[Callable[..., Any]]
    callback_device_json: Optional[Union[str, Dict[str, Any]]]
    timing: TimingMode


class LlmOptions(_Options):
    """Who answers the prompts (ks_llm_options). The constructors below set
    `source` with the fields it needs; `callback` receives one
    ksearch.LlmRequest, `batch_callback` a list of them."""
    _struct, _init, _version = "ks_llm_options", "ks_llm_options_init", "KS_LLM_OPTIONS_VERSION"
    _callbacks = ("callback", "batch_callback")
    source: LlmSource
    model: Optional[str]
    base_url: Optional[str]
    api: ApiKind
    reasoning_effort: Optional[str]
    temperature: float
    max_output_tokens: int
    api_key_env: Optional[str]
    api_key: Optional[str]
    headers: List[str]
    request_timeout_s: float
    connect_timeout_s: float
    proxy: Optional[str]
    max_retries: int
    max_concurrency: int
    price_file: Optional[PathLike]
    extra_body_json: Optional[Union[str, Dict[str, Any]]]
    replay_path: Optional[PathLike]
    replay_on_divergence: ReplayDivergence
    command_argv: List[str]
    command_timeout_s: float
    command_input: CommandInput
    callback: Optional[Callable[..., Any]]
    batch_callback: Optional[Callable[..., Any]]

    @classmethod
    def offline(cls) -> "LlmOptions":
        """No model: with Strategy.AUTO the search tunes declared parameters."""
        return cls(source=LlmSource.OFFLINE)

    @classmethod
    def openai(cls, model: str, **fields: Any) -> "LlmOptions":
        """An OpenAI-compatible endpoint (base_url, api, api_key_env, ... as fields)."""
        return cls(source=LlmSource.OPENAI, model=model, **fields)

    @classmethod
    def replay(cls, transcript: PathLike, **fields: Any) -> "LlmOptions":
        return cls(source=LlmSource.REPLAY, replay_path=transcript, **fields)

    @classmethod
    def command(cls, argv: Sequence[str], **fields: Any) -> "LlmOptions":
        """A program that reads the prompt on stdin and writes the answer."""
        return cls(source=LlmSource.COMMAND, command_argv=list(argv), **fields)

    @classmethod
    def from_callback(cls, fn: Callable[..., Any], **fields: Any) -> "LlmOptions":
        """A Python model, one prompt per call: fn(LlmRequest) -> str or LlmAnswer."""
        return cls(source=LlmSource.CALLBACK, callback=fn, **fields)

    @classmethod
    def from_batch_callback(cls, fn: Callable[..., Any], **fields: Any) -> "LlmOptions":
        """A Python model given every prompt of a step at once:
        fn(list[LlmRequest]) -> list of str or LlmAnswer."""
        return cls(source=LlmSource.BATCH_CALLBACK, batch_callback=fn, **fields)


def search_settings() -> List[Dict[str, Any]]:
    """The search's settings by name, as the library's table has them
    (docs/options.md): each a dict with "key", "component", "type",
    "default", "min", "max", "help", "flag" and "replay"."""
    global _SETTINGS
    if _SETTINGS is None:
        fn = c().ks_search_settings_json
        _SETTINGS = json.loads(fn().decode())
    return list(_SETTINGS)


_SETTINGS: Optional[List[Dict[str, Any]]] = None


def _settings_doc() -> str:
    lines = []
    for s in search_settings():
        bounds = [f">= {s['min']:g}" if s["min"] is not None else "", f"<= {s['max']:g}" if s["max"] is not None else ""]
        b = ", ".join(x for x in bounds if x)
        lines.append(f"    {s['key']} ({s['type']}, default {json.dumps(s['default'])}{', ' + b if b else ''}): "
                     f"{s['help']}")
    return "\n".join(lines)


class _SearchOptionsType(type):
    """Builds SearchOptions' docstring and signature from the library's
    settings table when they are first asked for (help(), inspect)."""

    @property
    def __doc__(cls) -> str:  # type: ignore[override]
        try:
            table = _settings_doc()
        except Exception as e:  # no library to ask: the docstring without the table
            return f"{cls._doc}\n\n(The settings by name come from the library, which did not load: {e})"
        return cls._doc + "\n\nSettings by name (keyword arguments or attributes):\n" + table

    @property
    def __signature__(cls) -> Any:
        import inspect
        params = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None) for n in cls.fields()]
        params += [inspect.Parameter(s["key"], inspect.Parameter.KEYWORD_ONLY, default=s["default"])
                   for s in search_settings() if s["key"] not in cls.fields()]
        return inspect.Signature(params)


class SearchOptions(_Options, metaclass=_SearchOptionsType):
    _doc = """Everything a search takes (ks_search_options). `progress`, `event`
    and `cancel` are taken by ksearch.run_search as arguments. Every setting
    of the library's table (ksearch.search_settings(), docs/options.md) is
    also a keyword argument and an attribute by its name
    (`SearchOptions(wm_propose_every=0)`); one that is not a field of the
    struct goes to the library in `config_json` and wins over the field of
    the same meaning."""
    _struct, _init, _version = "ks_search_options", "ks_search_options_init", "KS_SEARCH_OPTIONS_VERSION"
    _nested = {"budget": BudgetOptions, "world_model": WorldModelOptions, "tune": TuneOptions,
               "eval": EvalOptions, "llm": LlmOptions, "evolve": EvolveOptions}
    _bools = ("language_from_task", "weak_check", "start_from_starting_point", "remeasure", "measure_baseline",
              "wandb")
    _callbacks = ("progress", "event")
    _special = ("cancel",)
    task: Optional[str]
    run_dir: Optional[PathLike]
    kernelbench_dir: Optional[PathLike]
    strategy: Strategy
    language: Language
    language_from_task: bool
    parallel: int
    seed: int
    budget: BudgetOptions
    world_model: WorldModelOptions
    tune: TuneOptions
    eval: EvalOptions
    llm: LlmOptions
    progress: Optional[Callable[..., Any]]
    event: Optional[Callable[..., Any]]
    cancel: Any
    weak_check: bool
    continue_from_solution: Optional[PathLike]
    continue_from_world_model: Optional[PathLike]
    start_from_starting_point: bool
    remeasure: bool
    dataset: Optional[PathLike]
    baseline_solution: Optional[str]
    measure_baseline: bool
    feedback_workloads: List[str]
    feedback_policy: Optional[str]
    feedback_count: int
    feedback_seed: int
    wandb: bool
    wandb_project: Optional[str]
    run_name: Optional[str]
    evolve: EvolveOptions
    config_json: Optional[Union[str, Dict[str, Any]]]

    def __init__(self, **fields: Any) -> None:
        object.__setattr__(self, "_by_name", {})
        super().__init__(**fields)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self.fields() and any(s["key"] == name for s in search_settings()):
            self._by_name[name] = value
            return
        super().__setattr__(name, value)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # pickle, copy and friends ask for these: never a setting
            raise AttributeError(name)
        by_name = self.__dict__.get("_by_name", {})
        if name in by_name:
            return by_name[name]
        for s in search_settings():
            if s["key"] == name:
                return s["default"]
        raise AttributeError(f"SearchOptions has no option \"{name}\"")

    def to_dict(self) -> Dict[str, Any]:
        out = super().to_dict()
        out.update(self._by_name)
        return out

    def copy(self) -> "SearchOptions":
        o = super().copy()
        object.__setattr__(o, "_by_name", dict(self._by_name))
        return o  # type: ignore[return-value]

    def _fill(self, s: Any, keep: _Keep, wrap: Optional[CallbackWrapper], path: str) -> None:
        super()._fill(s, keep, wrap, path)
        if not self._by_name:
            return
        given = self.config_json
        merged = json.loads(given) if isinstance(given, str) else dict(given or {})
        merged.update(self._by_name)
        s.config_json = keep(to_bytes(json.dumps(merged), "config_json"))


class ResumeOptions(_Options):
    """What may change when a run folder is resumed (ks_resume_options):
    `llm` None keeps the recorded model (a run made with a callback needs
    one again)."""
    _struct, _init, _version = "ks_resume_options", "ks_resume_options_init", "KS_RESUME_OPTIONS_VERSION"
    _nested = {"llm": LlmOptions}
    _callbacks = ("eval_callback", "eval_batch_callback", "progress", "event")
    _special = ("cancel",)
    max_rounds: int
    llm: Optional[LlmOptions]
    eval_callback: Optional[Callable[..., Any]]
    eval_batch_callback: Optional[Callable[..., Any]]
    progress: Optional[Callable[..., Any]]
    event: Optional[Callable[..., Any]]
    cancel: Any


class ReplayOptions(_Options):
    """What a replay of a run folder takes (ks_replay_options):
    `config_changes_json` (a dict or JSON) names recorded settings to change;
    `llm` None replays without a model."""
    _struct, _init, _version = "ks_replay_options", "ks_replay_options_init", "KS_REPLAY_OPTIONS_VERSION"
    _nested = {"llm": LlmOptions}
    _bools = ("allow_prompt_changes",)
    _callbacks = ("eval_callback", "eval_batch_callback", "progress", "event")
    _special = ("cancel",)
    run_dir: Optional[PathLike]
    config_changes_json: Optional[Union[str, Dict[str, Any]]]
    on_divergence: ReplayDivergence
    allow_prompt_changes: bool
    llm: Optional[LlmOptions]
    eval_callback: Optional[Callable[..., Any]]
    eval_batch_callback: Optional[Callable[..., Any]]
    progress: Optional[Callable[..., Any]]
    event: Optional[Callable[..., Any]]
    cancel: Any


class KernelLoadOptions(_Options):
    """Where a found kernel comes from (ks_kernel_load_options): exactly one
    of result, run_dir, solution_path and solution_json."""
    _struct, _init, _version = ("ks_kernel_load_options", "ks_kernel_load_options_init",
                                "KS_KERNEL_LOAD_OPTIONS_VERSION")
    _bools = ("load_module",)
    _special = ("result",)
    result: Any
    run_dir: Optional[PathLike]
    solution_path: Optional[PathLike]
    solution_json: Optional[Union[str, Dict[str, Any]]]
    task: Optional[str]
    cuda_arch: Optional[str]
    cache_dir: Optional[PathLike]
    load_module: bool
