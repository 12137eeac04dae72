"""Experiment tracking for ksearch run folders: Weights & Biases and a CSV of attempts.

    python3 -m ksearch.tracking RUN --csv attempts.csv             # no wandb needed
    python3 -m ksearch.tracking RUN --wandb --project kernels      # one W&B run per run folder
    python3 -m ksearch.tracking RUN --wandb --csv a.csv --follow   # a live run: tails the folder

It reads the run folder (docs/search.md) and needs neither the library nor a
GPU, so it runs anywhere the folder is, also while a search writes it. One W&B
step per counted round, under names modelled on K-Search's:

    {task}/generate/{score}       the round's score (null if it failed), named as K-Search names it:
                                  inv_latency_ms (1 / geometric-mean latency) or, for tasks scored
                                  against a baseline (FlashInfer-Bench), vs_baseline
    {task}/generate/best_{score}  the best so far
    {task}/generate/latency_ms, best_latency_ms, speedup, best_speedup, passed
    {task}/llm/input_tokens, output_tokens, reasoning_tokens, cost_usd, cum_cost_usd   (spent towards the round)

and an artifact of type "generated-code" per passing round, named like
K-Search's ("{task}_r{round}_{solution}_code"), holding the source files, the
launch plan, raw_code.txt (the model's answer from transcript.jsonl),
wm/world_model.json (the tree the round's action came from) and
eval/round_summary.txt beside eval/eval.json. The config comes from the
manifest (K-Search's keys, plus the full configuration under "ksearch").

With --ksearch-names the W&B run is the one K-Search's own --wandb makes, name
for name (docs/search.md, "K-Search's names"): project $WANDB_PROJECT else
"flashinfer-bench", run name $RUN_NAME, K-Search's config keys, per counted
round {task}/generate/{score_name} and {task}/generate/best_{score_name} at
step=round with K-Search's task and score names, and per passing round a
"generated-code" artifact r{round}_code (world_model strategy) or
{task[:32]}_r{round}_{solution[-32:]}_code (the others) holding clean/<files>,
raw/raw_code.txt, wm/world_model.json (world_model strategy only) and
eval/round_summary.txt. `ksearch run --wandb` starts this program with
--in-run: it follows the run until its standard input closes, and a W&B
problem is a one-line warning (exit status 3), never a failed search.

W&B settings come from its usual environment (WANDB_API_KEY, WANDB_MODE=offline,
WANDB_DIR, WANDB_PROJECT, ...) or the options. Without `wandb` installed the CSV
still works; --wandb then says how to install it.

A run folder may come from someone else (docs/security.md): every file it
reads or uploads from the folder is checked name by name first, and a symbolic
link on the way, a '..' or anything but a regular file is skipped with a
warning, so a link in the folder cannot upload a private file.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import select
import signal
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

__all__ = ["RunFolder", "Round", "Replay", "CsvSink", "WandbSink", "wandb_config", "ksearch_task_name",
           "ksearch_score", "ksearch_wandb_config", "main"]

# EvalResult.score (higher is better) by its score_mode, under K-Search's names.
SCORE_NAMES = {"latency": "inv_latency_ms", "vs_baseline": "vs_baseline"}
CODE_KINDS = ("generate", "improve", "debug")
CSV_COLUMNS = ["seq", "round", "counted", "time", "status", "passed", "latency_ms", "speedup", "score",
               "best_latency_ms", "best_speedup", "improved", "solution_id", "parent_id", "action", "reason",
               "attempt_dir", "llm_calls", "input_tokens", "output_tokens", "reasoning_tokens", "cost_usd",
               "cum_cost_usd"]


def _warn(msg: str) -> None:
    print(f"ksearch.tracking: {msg}", file=sys.stderr)


def confined(root: Path, rel) -> Optional[Path]:
    """root/rel when it is a regular file and no name on the way is a symbolic link or '..': a run
    folder may come from someone else, and a link in it may lead to private files. None when it is
    absent, and (with a warning) when it is not such a file."""
    rel = Path(rel)
    if rel.is_absolute() or ".." in rel.parts:
        _warn(f"{rel} is not a path inside {root}; skipped")
        return None
    p = root
    for i, part in enumerate(rel.parts):
        p = p / part
        try:
            mode = os.lstat(p).st_mode
        except OSError:
            return None
        if stat.S_ISLNK(mode):
            _warn(f"{p} is a symbolic link; links in a run folder are not followed; skipped")
            return None
        last = i == len(rel.parts) - 1
        if (last and not stat.S_ISREG(mode)) or (not last and not stat.S_ISDIR(mode)):
            _warn(f"{p} is not a regular file; skipped")
            return None
    return p


def read_jsonl(path: Optional[Path]) -> List[dict]:
    """The complete lines of a log; a torn last line (a write in progress or a kill) is left out."""
    if path is None:
        return []
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    out = []
    lines = data.split(b"\n")
    for raw in lines[:-1]:  # the part after the last newline is incomplete
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except ValueError:
            _warn(f"{path.name}: a line is not JSON; left out")
            continue
        if isinstance(item, dict):
            out.append(item)
    return out


def _read_json(path: Optional[Path]) -> Optional[dict]:
    if path is None:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None


def failure_reason(ev: dict) -> str:
    """The first line of why an evaluation failed, as `ksearch` words it (EvalResult::summary)."""
    status = ev.get("status", "")
    if status == "passed":
        return ""
    first = ""
    for w in ev.get("workloads") or []:
        if w.get("status") != "passed" and w.get("message"):
            first = f"{w.get('name', '')}: {w['message']}"
            break
    if not first and ev.get("log"):
        first = ev["log"].split("\n", 1)[0]
    if len(first) > 160:
        first = first[:157] + "..."
    return f"{status} ({first})" if first else status


class RunFolder:
    """Read access to a run folder; never writes, never takes the run's lock."""

    def __init__(self, path):
        self.path = Path(path)
        if confined(self.path, "manifest.json") is None:
            raise FileNotFoundError(f"{self.path} holds no run (manifest.json is missing)")

    def file(self, rel) -> Optional[Path]:
        """A file of the folder, never through a link (confined())."""
        return confined(self.path, rel)

    def manifest(self) -> dict:
        # Written atomically (temp file and rename): always whole. Retry once
        # in case the rename lands between open and read on odd file systems.
        for _ in range(3):
            m = _read_json(self.file("manifest.json"))
            if m is not None:
                return m
            time.sleep(0.1)
        raise ValueError(f"{self.path / 'manifest.json'} is not valid JSON")

    def attempts(self) -> List[dict]:
        return read_jsonl(self.file("attempts.jsonl"))

    def events(self) -> List[dict]:
        return read_jsonl(self.file("events.jsonl"))

    def transcript(self) -> List[dict]:
        return read_jsonl(self.file("transcript.jsonl"))

    def attempt_rel(self, a: dict) -> Path:
        return Path("attempts") / f"{int(a.get('seq', 0)):04d}-{a.get('solution_id') or 'no-code'}"

    def attempt_dir(self, a: dict) -> Path:
        return self.path / self.attempt_rel(a)

    def eval(self, a: dict) -> dict:
        return _read_json(self.file(self.attempt_rel(a) / "eval.json")) or {}

    def sources(self, a: dict) -> List[Tuple[str, Path]]:
        """(path in the solution, file in the attempt folder) per source file; one that is a link is left out."""
        d = self.attempt_rel(a)
        sol = _read_json(self.file(d / "solution.json")) or {}
        out = []
        for s in sol.get("sources") or []:
            if "file" in s:
                f = self.file(d / str(s["file"]))
                if f is not None:
                    out.append((s.get("path", s["file"]), f))
        return out

    def world_model(self, version: int) -> Optional[dict]:
        return _read_json(self.file(Path("world_model") / f"v{version:06d}.json"))

    def writer_alive(self) -> Optional[bool]:
        """Whether a process holds the run's lock (Linux /proc/locks); None when unknown."""
        try:
            ino = os.stat(self.path / "lock").st_ino
            dev = os.stat(self.path / "lock").st_dev
            text = Path("/proc/locks").read_text()
        except OSError:
            return None
        major, minor = os.major(dev), os.minor(dev)
        for line in text.splitlines():
            parts = line.split()
            # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
            for p in parts:
                m = re.fullmatch(r"([0-9a-f]+):([0-9a-f]+):(\d+)", p)
                if m and int(m.group(3)) == ino and int(m.group(1), 16) == major and int(m.group(2), 16) == minor:
                    return True
        return False


def score_of(ev: dict, attempt: dict) -> float:
    """The score the session ranks by; 1 / latency where the evaluation has none."""
    if attempt.get("status") != "passed":
        return 0.0
    if float(ev.get("score") or 0) > 0:
        return float(ev["score"])
    lat = float(attempt.get("latency_ms") or 0)
    return 1.0 / lat if lat > 0 else 0.0


@dataclass
class Round:
    """One attempt, with what the tracking sinks need."""
    attempt: dict
    eval: dict
    best_latency_ms: float
    best_speedup: float
    improved: bool
    score: float = 0.0
    best_score: float = 0.0
    llm: Dict[str, float] = field(default_factory=dict)  # usage spent towards this round
    cum_cost_usd: float = 0.0
    wm_version: Optional[int] = None

    @property
    def round(self) -> int:
        return int(self.attempt.get("round", 0))

    @property
    def counted(self) -> bool:
        return self.round > 0

    @property
    def passed(self) -> bool:
        return self.attempt.get("status") == "passed"

    @property
    def latency_ms(self) -> float:
        return float(self.attempt.get("latency_ms") or 0)

    def csv_row(self, folder: RunFolder) -> dict:
        a = self.attempt
        lat = self.latency_ms
        return {
            "seq": a.get("seq"), "round": self.round, "counted": int(self.counted), "time": a.get("time", ""),
            "status": a.get("status", ""), "passed": int(self.passed), "latency_ms": lat or "",
            "speedup": a.get("speedup") or "", "score": self.score or "",
            "best_latency_ms": self.best_latency_ms or "", "best_speedup": self.best_speedup or "",
            "improved": int(self.improved), "solution_id": a.get("solution_id", ""), "parent_id": a.get("parent_id", ""),
            "action": a.get("action", ""), "reason": failure_reason(self.eval) if self.eval else "",
            "attempt_dir": str(folder.attempt_dir(a).relative_to(folder.path)),
            "llm_calls": int(self.llm.get("calls", 0)) if self.counted else "",
            "input_tokens": int(self.llm.get("input_tokens", 0)) if self.counted else "",
            "output_tokens": int(self.llm.get("output_tokens", 0)) if self.counted else "",
            "reasoning_tokens": int(self.llm.get("reasoning_tokens", 0)) if self.counted else "",
            "cost_usd": self.llm.get("cost_usd", 0.0) if self.counted else "",
            "cum_cost_usd": self.cum_cost_usd if self.counted else "",
        }


class Replay:
    """Turns a run folder into Rounds, in order, each once. poll() returns the
    attempts that are complete since the last call: their index line is
    written and, while the run goes, their `evaluated` event too (so the LLM
    usage and the world model that led to them are final)."""

    def __init__(self, folder: RunFolder):
        self.folder = folder
        self.done = 0
        self.best = 0.0
        self.best_speedup = 0.0
        self.best_score = 0.0
        self.cum_cost = 0.0

    def _context(self, events: List[dict]):
        """Per counted round: LLM usage spent towards it, and the snapshot version current when it was evaluated."""
        usage: Dict[int, Dict[str, float]] = {}
        wm_at: Dict[int, Optional[int]] = {}
        evaluated = set()
        rounds_done, last_wm, seen_calls = 0, None, set()
        for e in events:
            t = e.get("type")
            if t == "world_model_snapshot" and isinstance(e.get("version"), int):
                last_wm = e["version"]
            elif t == "llm_call":
                if e.get("llm_seq") in seen_calls:
                    continue
                seen_calls.add(e.get("llm_seq"))
                u = e.get("usage") or {}
                r = usage.setdefault(rounds_done + 1, {"calls": 0, "input_tokens": 0, "output_tokens": 0,
                                                       "reasoning_tokens": 0, "cost_usd": 0.0})
                r["calls"] += 1
                for k in ("input_tokens", "output_tokens", "reasoning_tokens", "cost_usd"):
                    r[k] += u.get(k) or 0
            elif t == "evaluated" and e.get("counted", True):
                rnd = int(e.get("round", 0))
                if rnd > 0:
                    evaluated.add(rnd)
                    wm_at.setdefault(rnd, last_wm)
                    rounds_done = max(rounds_done, rnd)
        return usage, wm_at, evaluated

    def poll(self, final: bool = False) -> List[Round]:
        attempts = self.folder.attempts()
        if len(attempts) <= self.done:
            return []
        usage, wm_at, evaluated = self._context(self.folder.events())
        out = []
        for a in attempts[self.done:]:
            rnd = int(a.get("round", 0))
            if not final and rnd > 0 and rnd not in evaluated:
                break  # its event is not written yet: take it next time
            ev = self.folder.eval(a)
            score = score_of(ev, a)
            improved = False
            # The best so far as the session keeps it: the highest score of a
            # counted round or of an evaluation adopted from another run of the
            # same task and device (an uncounted attempt marked recorded_from;
            # docs/world-model.md, "Warm start").
            adopted = rnd == 0 and bool((ev.get("metrics") or {}).get("recorded_from"))
            if (rnd > 0 or adopted) and score > self.best_score:
                self.best_score, improved = score, True
                self.best, self.best_speedup = float(a.get("latency_ms") or 0), float(a.get("speedup") or 0)
            u = usage.get(rnd, {}) if rnd > 0 else {}
            if rnd > 0:
                self.cum_cost += u.get("cost_usd", 0.0)
            out.append(Round(attempt=a, eval=ev, best_latency_ms=self.best, best_speedup=self.best_speedup,
                             improved=improved, score=score, best_score=self.best_score, llm=u,
                             cum_cost_usd=self.cum_cost, wm_version=wm_at.get(rnd)))
            self.done += 1
        return out


class CsvSink:
    """One row per attempt, appended (and flushed) as attempts come."""

    def __init__(self, path, folder: RunFolder):
        self.folder = folder
        self.file = open(path, "w", newline="", encoding="utf-8")
        self.writer = csv.DictWriter(self.file, fieldnames=CSV_COLUMNS)
        self.writer.writeheader()
        self.rows = 0

    def add(self, r: Round) -> None:
        self.writer.writerow(r.csv_row(self.folder))
        self.file.flush()
        self.rows += 1

    def close(self) -> None:
        self.file.close()


def _safe_name(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", s).strip("_") or "run"


def wandb_config(m: dict, run_dir: Path) -> dict:
    """The W&B config: K-Search's keys first, then the whole configuration."""
    cfg = m.get("config") or {}
    dev = m.get("device") or {}
    task = m.get("task") or {}
    return {
        "task": task.get("name", ""),
        "generator": {"model_name": cfg.get("model", ""), "language": cfg.get("language", ""),
                      "target_gpu": dev.get("name", dev.get("backend", ""))},
        "max_opt_rounds": cfg.get("max_rounds"),
        "enable_world_model": cfg.get("strategy") == "world_model",
        "wm_stagnation_window": cfg.get("wm_stagnation_window"),
        "wm_max_difficulty": cfg.get("wm_max_difficulty"),
        "artifacts_dir": str(run_dir),
        "ksearch": {"library_version": m.get("library_version"), "created": m.get("created"), "task": task,
                    "config": cfg, "llm": m.get("llm"), "evaluator": m.get("evaluator"), "device": dev},
    }


# K-Search's W&B names (its --wandb; docs/search.md, "K-Search's names").
KSEARCH_PROJECT = "flashinfer-bench"


def ksearch_task_name(name: str) -> str:
    """K-Search's {task} for a libksearch task name: the task object's name in K-Search, which is the
    FlashInfer definition, "gpumode_trimul" or "kernelbench_l{level}_p{problem_id}"; other tasks keep
    their name with '/' as '_' (a '/' would nest W&B's panel sections)."""
    if name.startswith("flashinfer/"):
        return _safe_name(name[len("flashinfer/"):])
    if name in ("gpumode/trimul", "gpumode/trimul-upstream"):
        return "gpumode_trimul"
    m = re.fullmatch(r"kernelbench/level(\d+)/(\d+)_.*", name)
    if m:
        return f"kernelbench_l{int(m.group(1))}_p{int(m.group(2))}"
    return _safe_name(name.replace("/", "_"))


def _positive(x) -> Optional[float]:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


def ksearch_score(task: str, ev: dict, attempt: dict) -> Tuple[str, Optional[float]]:
    """(score_name, value) as K-Search's task would report this evaluation; value None unless it passed.
    Always higher is better:
      mean_vs_baseline     mean over benchmark workloads of baseline / kernel latency (a task scored
                           against its baseline: FlashInfer-Bench; EvalResult.vs_baseline)
      mean_speedup_vs_ref  FlashInfer-Bench without a baseline latency: the arithmetic mean over
                           benchmark workloads of reference / kernel latency
      speedup_over_eager   KernelBench: reference (PyTorch eager) / kernel latency
      inv_latency_ms       GPUMode TriMul and every other task: 1 / the geometric-mean latency"""
    passed = attempt.get("status") == "passed"
    vs_base = _positive(ev.get("vs_baseline"))
    if ev.get("score_mode") == "vs_baseline" and (vs_base or not passed):
        return "mean_vs_baseline", vs_base if passed else None
    if task.startswith("flashinfer/"):
        ratios = []
        for w in ev.get("workloads") or []:
            t = w.get("timing") or {}
            mean, ref = _positive(t.get("latency_ms") or t.get("mean_ms")), _positive(w.get("reference_ms"))
            if w.get("benchmark", True) and mean and ref:
                ratios.append(ref / mean)
        value = sum(ratios) / len(ratios) if ratios else _positive(attempt.get("speedup"))
        return "mean_speedup_vs_ref", value if passed else None
    if task.startswith("kernelbench/"):
        return "speedup_over_eager", _positive(attempt.get("speedup")) if passed else None
    lat = _positive(attempt.get("latency_ms"))
    return "inv_latency_ms", 1.0 / lat if passed and lat else None


def _ksearch_task_config(task: dict) -> dict:
    """K-Search's task.get_config_for_logging(), for the keys libksearch has."""
    name = task.get("name", "")
    if name.startswith("flashinfer/"):
        return {"task_source": "flashinfer", "task_path": task.get("reference") or None,
                "definition": ksearch_task_name(name)}
    if name.startswith("gpumode/"):
        return {"task_type": "gpu_mode", "task_name": ksearch_task_name(name)}
    m = re.fullmatch(r"kernelbench/level(\d+)/((\d+)_.*)", name)
    if m:
        return {"task_type": "kernelbench", "task_name": ksearch_task_name(name), "problem_name": m.group(2),
                "level": int(m.group(1)), "problem_id": int(m.group(3))}
    return {"task_type": "ksearch", "task_name": ksearch_task_name(name)}


def ksearch_wandb_config(m: dict, run_dir: Path) -> dict:
    """The config K-Search's generate_and_evaluate gives wandb.init, then the whole configuration."""
    cfg = m.get("config") or {}
    dev = m.get("device") or {}
    task = m.get("task") or {}
    sol = cfg.get("continue_from_solution")
    wm = cfg.get("continue_from_world_model")
    return {
        "task": _ksearch_task_config(task),
        "generator": {"model_name": cfg.get("model", ""), "language": cfg.get("language", ""),
                      "target_gpu": dev.get("name", dev.get("backend", ""))},
        "max_opt_rounds": cfg.get("max_rounds"),
        "continue_from_solution": (sol.get("name") or sol.get("id")) if isinstance(sol, dict) else sol,
        "continue_from_world_model": wm.get("source") if isinstance(wm, dict) else wm,
        "enable_world_model": cfg.get("strategy") == "world_model",
        "wm_stagnation_window": cfg.get("wm_stagnation_window"),
        "wm_max_difficulty": cfg.get("wm_max_difficulty"),
        # A run folder keeps every evaluation and the best solution; the final evaluation covers every workload.
        "save_results": True,
        "save_solutions": True,
        "num_eval_workload": None,
        "artifacts_dir": str(run_dir),
        "ksearch": wandb_config(m, run_dir)["ksearch"],
    }


class WandbMissing(RuntimeError):
    """The wandb package cannot be imported."""


class WandbSink:
    """One W&B run per run folder: a step per counted round, an artifact per passing round. With
    ksearch_names, under K-Search's names only (ksearch_task_name, ksearch_score, ksearch_wandb_config)."""

    def __init__(self, folder: RunFolder, project: Optional[str] = None, entity: Optional[str] = None,
                 name: Optional[str] = None, run_id: Optional[str] = None, tags: Iterable[str] = (),
                 wandb_dir: Optional[str] = None, ksearch_names: bool = False):
        try:
            import wandb  # noqa: F401
        except ImportError:
            raise WandbMissing("the W&B bridge needs the wandb package: pip install wandb "
                               "(the CSV works without it)") from None
        import wandb
        self.wandb = wandb
        self.folder = folder
        self.ksearch_names = ksearch_names
        m = folder.manifest()
        self.task_full = (m.get("task") or {}).get("name", "") or "task"
        self.task = ksearch_task_name(self.task_full) if ksearch_names else self.task_full
        self.prefix = f"{self.task}/generate"
        self.world_model = (m.get("config") or {}).get("strategy") == "world_model"
        self.language = (m.get("config") or {}).get("language", "")
        dev = m.get("device") or {}
        self.target_gpu = dev.get("name", dev.get("backend", ""))
        self.ks_best: Optional[Tuple[str, float]] = None  # (score_name, score) of K-Search's best so far
        self.transcript_pos = 0
        self.artifacts = 0
        self.steps = 0
        run_dir = folder.path.resolve()
        if ksearch_names:
            # K-Search: --wandb-project else $WANDB_PROJECT else "flashinfer-bench"; --run-name else $RUN_NAME
            # else W&B's own generated name.
            project = project or os.environ.get("WANDB_PROJECT") or KSEARCH_PROJECT
            name = name or os.environ.get("RUN_NAME") or None
            config = ksearch_wandb_config(m, run_dir)
        else:
            project = project or os.environ.get("WANDB_PROJECT") or "ksearch"
            name = name or run_dir.name
            config = wandb_config(m, run_dir)
        self.run = wandb.init(project=project, entity=entity, name=name, id=run_id,
                              resume="allow" if run_id else None, config=config,
                              dir=wandb_dir, job_type=None if ksearch_names else "ksearch-search",
                              tags=list(tags) or None)
        # A resumed W&B run continues after the last step it holds.
        self.first_step = int(getattr(self.run, "step", 0) or 0) if run_id else 0
        self.url = getattr(self.run, "url", None)  # None offline
        self.local_dir = str(Path(self.run.dir).parent)  # what `wandb sync` uploads

    def add(self, r: Round) -> None:
        if not r.counted or r.round < self.first_step:
            return
        if self.ksearch_names:
            self._add_ksearch(r)
            return
        p = self.prefix
        name = SCORE_NAMES.get(r.eval.get("score_mode", "latency"), "score")
        metrics = {
            f"{p}/{name}": r.score if r.passed and r.score > 0 else None,
            f"{p}/best_{name}": r.best_score or None,
            f"{p}/latency_ms": r.latency_ms if r.passed else None,
            f"{p}/best_latency_ms": r.best_latency_ms or None,
            f"{p}/speedup": float(r.attempt.get("speedup") or 0) if r.passed else None,
            f"{p}/best_speedup": r.best_speedup or None,
            f"{p}/passed": int(r.passed),
            f"{self.task}/llm/calls": int(r.llm.get("calls", 0)),
            f"{self.task}/llm/input_tokens": int(r.llm.get("input_tokens", 0)),
            f"{self.task}/llm/output_tokens": int(r.llm.get("output_tokens", 0)),
            f"{self.task}/llm/reasoning_tokens": int(r.llm.get("reasoning_tokens", 0)),
            f"{self.task}/llm/cost_usd": float(r.llm.get("cost_usd", 0.0)),
            f"{self.task}/llm/cum_cost_usd": r.cum_cost_usd,
            "round": r.round,
        }
        self.run.log(metrics, step=r.round)
        self.steps += 1
        if r.passed:
            self.run.log_artifact(self._artifact(r))
            self.artifacts += 1

    def _add_ksearch(self, r: Round) -> None:
        """K-Search's two scalars at step=round: the round's score (None unless it passed) and the best so far
        (under best_score, None, before the first pass), and the artifact of a passing round."""
        score_name, score = ksearch_score(self.task_full, r.eval, r.attempt)
        if score is not None and (self.ks_best is None or score > self.ks_best[1]):
            self.ks_best = (score_name, score)
        best_key = f"{self.prefix}/best_{self.ks_best[0]}" if self.ks_best else f"{self.prefix}/best_score"
        self.run.log({f"{self.prefix}/{score_name}": score, best_key: self.ks_best[1] if self.ks_best else None},
                     step=r.round)
        self.steps += 1
        if r.passed:
            self.run.log_artifact(self._ksearch_artifact(r, score_name, score))
            self.artifacts += 1

    def _ksearch_artifact(self, r: Round, score_name: str, score: Optional[float]):
        a, ev = r.attempt, r.eval
        sol = a.get("solution_id", "")
        if self.world_model:
            name = f"r{r.round}_code"
        else:
            name = f"{_safe_name(self.task[:32])}_r{r.round}_{_safe_name(sol[-32:])}_code"
        meta = {"definition": self.task, "round": r.round, "solution": sol, "language": self.language,
                "target_gpu": self.target_gpu}
        if self.world_model:
            meta["wm_enabled"] = True
        art = self.wandb.Artifact(name, type="generated-code", metadata=meta)
        sources = []
        for path, file in self.folder.sources(a):
            text = file.read_text(encoding="utf-8", errors="replace")
            sources.append((path, text))
            art.add_file(str(file), name="clean/" + path.lstrip("/").replace("..", "__"))
        plan = self.folder.file(self.folder.attempt_rel(a) / "launch_plan.json")
        if plan is not None:  # a CUDA kernel's launch plan is part of its code
            art.add_file(str(plan), name="clean/launch_plan.json")
        raw = self._raw_answer(r, sources)
        with art.new_file("raw/raw_code.txt", encoding="utf-8") as f:
            f.write(raw or "")  # K-Search writes "" where there is no model answer (the tune strategy)
        if self.world_model:
            # The tree the round's action came from; "" before the first snapshot, as K-Search writes.
            wm = self.folder.file(Path("world_model") / f"v{r.wm_version:06d}.json") if r.wm_version else None
            with art.new_file("wm/world_model.json", encoding="utf-8") as f:
                f.write(wm.read_text(encoding="utf-8", errors="replace") if wm is not None else "")
        with art.new_file("eval/round_summary.txt", encoding="utf-8") as f:
            f.write(ksearch_round_summary(ev, a, score_name, score, self.world_model))
        return art

    def _raw_answer(self, r: Round, sources: List[Tuple[str, str]]) -> Optional[str]:
        """The model's answer that held this round's code: the first code answer at or after the last match
        that contains every source file."""
        entries = [e for e in self.folder.transcript() if e.get("kind") in CODE_KINDS]
        wanted = [text.strip() for _, text in sources if text.strip()]
        if not wanted:
            return None
        order = list(range(self.transcript_pos, len(entries))) + list(range(0, self.transcript_pos))
        for i in order:
            text = ((entries[i].get("response") or {}).get("text")) or ""
            if all(w in text for w in wanted):
                self.transcript_pos = i + 1
                return text
        return None

    def _artifact(self, r: Round):
        a = r.attempt
        sol = a.get("solution_id", "")
        art = self.wandb.Artifact(f"{_safe_name(self.task)[:32]}_r{r.round}_{sol[-32:]}_code", type="generated-code",
                                  metadata={"round": r.round, "solution_id": sol, "parent_id": a.get("parent_id", ""),
                                            "action": a.get("action", ""), "latency_ms": r.latency_ms,
                                            "speedup": a.get("speedup"), "wm_version": r.wm_version})
        d = self.folder.attempt_rel(a)
        sources = []
        for path, file in self.folder.sources(a):
            text = file.read_text(encoding="utf-8", errors="replace")
            sources.append((path, text))
            art.add_file(str(file), name=path.lstrip("/").replace("..", "__"))
        for rel, name in ((d / "launch_plan.json", "launch_plan.json"), (d / "eval.json", "eval/eval.json")):
            f = self.folder.file(rel)
            if f is not None:
                art.add_file(str(f), name=name)
        raw = self._raw_answer(r, sources)
        with art.new_file("raw_code.txt", encoding="utf-8") as f:
            f.write(raw if raw is not None else "(no answer in transcript.jsonl holds this code)\n")
        if r.wm_version is not None:
            wm = self.folder.file(Path("world_model") / f"v{r.wm_version:06d}.json")
            if wm is not None:
                art.add_file(str(wm), name="wm/world_model.json")
        with art.new_file("eval/round_summary.txt", encoding="utf-8") as f:
            f.write(round_summary(r, self.task))
        return art

    def finish(self, status: str, exit_code: int = 0) -> None:
        m = self.folder.manifest()
        totals = m.get("totals") or {}
        best = totals.get("best") or {}
        self.run.summary.update({"status": m.get("status", status), "stop_reason": m.get("stop_reason", ""),
                                 "rounds": totals.get("rounds"), "best_solution_id": best.get("solution_id"),
                                 "best_latency_ms": best.get("latency_ms"), "best_speedup": best.get("speedup"),
                                 "llm_cost_usd": (totals.get("llm_usage") or {}).get("cost_usd")})
        self.run.finish(exit_code=exit_code)


def _num(x) -> Optional[float]:
    return float(x) if isinstance(x, (int, float)) and x > 0 else None


def ksearch_round_summary(ev: dict, a: dict, score_name: str, score: Optional[float], world_model: bool) -> str:
    """eval/round_summary.txt as K-Search writes it: key=value lines in world-model mode, its
    perf_summary_lines(prefix="round") in the base generator's."""
    passed = a.get("status") == "passed"
    lat, vs_base, speedup = _num(a.get("latency_ms")), _num(ev.get("vs_baseline")), _num(a.get("speedup"))
    if world_model:
        return (f"status={a.get('status')}\nscore_name={score_name}\nscore_value={score}\n"
                f"mean_vs_baseline_factor={vs_base}\nspeedup_factor={speedup}\nlatency_ms={lat}\n")
    lines = []
    if passed and lat:
        lines.append(f"- round_mean_latency_ms: {lat:.4f}")
    if passed and vs_base:
        lines.append(f"- round_vs_baseline: {vs_base:.3f}x")
    if passed and speedup:
        lines.append(f"- round_speedup_vs_ref: {speedup:.3f}x")
    if passed and score:
        lines.append(f"- round_score: {score:.4f}")
    return "\n".join(lines) + "\n"


def round_summary(r: Round, task: str) -> str:
    a, ev = r.attempt, r.eval
    lines = [f"task: {task}", f"round: {r.round}", f"action: {a.get('action', '')}",
             f"solution: {a.get('solution_id', '')} (parent {a.get('parent_id') or '-'})",
             f"status: {a.get('status', '')}"]
    if r.passed:
        lines.append(f"latency: {r.latency_ms:.6g} ms (geometric mean over benchmark workloads); "
                     f"speedup over the reference: {float(a.get('speedup') or 0):.3f}x")
    lines.append(f"best so far: {r.best_latency_ms:.6g} ms" + (" (this round)" if r.improved else ""))
    lines.append(f"LLM towards this round: {int(r.llm.get('calls', 0))} call(s), "
                 f"{int(r.llm.get('input_tokens', 0))} tokens in, {int(r.llm.get('output_tokens', 0))} out, "
                 f"${float(r.llm.get('cost_usd', 0)):.4f}")
    lines.append("")
    lines.append(f"{'workload':<32} {'status':<14} {'latency ms':>12} {'reference ms':>13} {'speedup':>8}")
    for w in ev.get("workloads") or []:
        t = w.get("timing") or {}
        mean, ref = float(t.get("latency_ms") or t.get("mean_ms") or 0), float(w.get("reference_ms") or 0)
        lines.append(f"{w.get('name', ''):<32} {w.get('status', ''):<14} {mean if mean else '-':>12} "
                     f"{ref if ref else '-':>13} {f'{ref / mean:.2f}x' if mean and ref else '-':>8}")
    return "\n".join(lines) + "\n"


def _wait_for_stdin(timeout: float) -> bool:
    """Waits up to `timeout` s for standard input; False once it is closed (the run that started this
    program has ended). Whatever arrives is only a wake-up."""
    try:
        ready, _, _ = select.select([0], [], [], timeout)
        return not ready or os.read(0, 4096) != b""
    except InterruptedError:
        return True
    except OSError:
        return False


def replay(run_dir, csv_path=None, use_wandb: bool = False, follow: bool = False, poll_s: float = 5.0,
           project=None, entity=None, name=None, run_id=None, tags=(), wandb_dir=None, quiet: bool = False,
           ksearch_names: bool = False, until_stdin_closes: bool = False) -> dict:
    """Replays a run folder into a CSV and/or W&B; with follow, keeps tailing it until the run ends
    (until_stdin_closes: until standard input closes, looking again when a byte arrives or every
    poll_s). Returns counts: {"attempts", "steps", "artifacts"}."""
    folder = RunFolder(run_dir)
    sinks = []
    csv_sink = CsvSink(csv_path, folder) if csv_path else None
    if csv_sink:
        sinks.append(csv_sink)
    wb = WandbSink(folder, project, entity, name, run_id, tags, wandb_dir, ksearch_names) if use_wandb else None
    if wb:
        sinks.append(wb)
    rep = Replay(folder)
    stop = {"now": False}
    follow = follow or until_stdin_closes
    stdin_open = until_stdin_closes

    def on_signal(signum, frame):
        stop["now"] = True

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)} if follow else {}
    count = 0
    exit_code = 0
    try:
        while True:
            if until_stdin_closes:
                running = stdin_open
            else:
                m = folder.manifest()
                running = m.get("status") == "running" and folder.writer_alive() is not False
            batch = rep.poll(final=not running)
            for r in batch:
                for s in sinks:
                    s.add(r)
                count += 1
                if not quiet and follow:
                    print(f"round {r.round}: {r.attempt.get('status')}"
                          + (f" {r.latency_ms:.4g} ms" if r.passed else "")
                          + f" (best {r.best_latency_ms:.4g} ms)", file=sys.stderr)
            if not follow or stop["now"] or (not running and not batch):
                break
            if batch:
                continue
            if until_stdin_closes:
                stdin_open = _wait_for_stdin(poll_s)
            else:
                time.sleep(poll_s)
    except BaseException:
        exit_code = 1
        raise
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if csv_sink:
            csv_sink.close()
        if wb:
            wb.finish(folder.manifest().get("status", ""), exit_code)
    return {"attempts": count, "steps": wb.steps if wb else 0, "artifacts": wb.artifacts if wb else 0,
            "wandb_dir": wb.local_dir if wb else None, "wandb_url": wb.url if wb else None}


LATER = "python3 -m ksearch.tracking RUN --wandb --ksearch-names"


def in_run(a) -> int:
    """--in-run: started by `ksearch run --wandb`. The search never fails because of W&B: a problem is one
    line on stderr and exit status 3."""
    def warn(what: str) -> int:
        print(f"ksearch: --wandb: {what}; the search goes on without W&B (log the run afterwards with "
              f"`{LATER.replace('RUN', a.run)}`)", file=sys.stderr, flush=True)
        return 3

    try:
        counts = replay(a.run, use_wandb=True, poll_s=a.poll, project=a.project, entity=a.entity, name=a.name,
                        run_id=a.run_id, tags=a.tag, wandb_dir=a.wandb_dir, quiet=True, ksearch_names=True,
                        until_stdin_closes=True)
    except WandbMissing:
        return warn(f"the wandb package is not installed for {sys.executable} (pip install wandb, or set "
                    "$KSEARCH_PYTHON to a Python that has it)")
    except Exception as e:  # W&B unreachable, not logged in, a full disk, ...
        text = " ".join(str(e).split()) or type(e).__name__
        return warn(f"W&B failed: {text[:300]}")
    where = counts["wandb_url"] or counts["wandb_dir"]
    line = f"ksearch: W&B: {counts['steps']} rounds, {counts['artifacts']} code artifacts logged"
    if counts["wandb_url"] is None and counts["wandb_dir"]:
        line += f" offline in {where} (upload: wandb sync {where})"
    elif where:
        line += f" to {where}"
    print(line, file=sys.stderr, flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m ksearch.tracking",
                                 description="Replay a ksearch run folder into Weights & Biases and/or a CSV of "
                                             "attempts; --follow tails a run that is still going.")
    ap.add_argument("run", help="the run folder")
    ap.add_argument("--csv", metavar="FILE", help="write one row per attempt to FILE (no wandb needed)")
    ap.add_argument("--wandb", action="store_true", help="log to Weights & Biases (pip install wandb)")
    ap.add_argument("--ksearch-names", action="store_true",
                    help="log exactly what K-Search's --wandb logs, under its names (project default "
                         "$WANDB_PROJECT else flashinfer-bench, run name $RUN_NAME)")
    ap.add_argument("--project", help="W&B project (default $WANDB_PROJECT, else ksearch; with --ksearch-names "
                                      "flashinfer-bench)")
    ap.add_argument("--entity", help="W&B entity (team or user)")
    ap.add_argument("--name", help="W&B run name (default: the run folder's name; with --ksearch-names $RUN_NAME, "
                                   "else W&B's)")
    ap.add_argument("--id", dest="run_id", help="W&B run id, to continue that W&B run (resume=allow)")
    ap.add_argument("--tag", action="append", default=[], help="W&B tag; may be repeated")
    ap.add_argument("--wandb-dir", help="where W&B keeps its local files (default $WANDB_DIR or ./wandb)")
    ap.add_argument("--follow", action="store_true", help="keep tailing the folder until the run ends (Ctrl-C stops)")
    ap.add_argument("--poll", type=float, default=5.0, metavar="S", help="seconds between looks with --follow (5)")
    ap.add_argument("--quiet", action="store_true", help="print nothing but errors")
    ap.add_argument("--in-run", action="store_true",
                    help="as `ksearch run --wandb` starts it: --wandb --ksearch-names, following the run until "
                         "standard input closes; a W&B problem is a one-line warning and exit status 3")
    a = ap.parse_args(argv)
    if a.in_run:
        return in_run(a)
    if not a.csv and not a.wandb:
        ap.error("give --csv FILE, --wandb, or both")
    try:
        counts = replay(a.run, a.csv, a.wandb, a.follow, a.poll, a.project, a.entity, a.name, a.run_id, a.tag,
                        a.wandb_dir, a.quiet, a.ksearch_names)
    except (FileNotFoundError, RuntimeError, ValueError) as e:
        print(f"ksearch.tracking: {e}", file=sys.stderr)
        return 1
    if not a.quiet:
        print(f"ksearch.tracking: {counts['attempts']} attempts" + (f" to {a.csv}" if a.csv else "")
              + (f"; W&B: {counts['steps']} rounds, {counts['artifacts']} artifacts" if a.wandb else ""),
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
