#!/usr/bin/env python3
"""End to end: `ksearch report` and `ksearch show --dot` on real runs.

1. A world-model run on the host task scale3, answered by the scripted
   responder (tests/fixtures/wm_e2e/responder.py through `--llm command:`).
2. A greedy run against the local OpenAI-compatible test server, whose answers
   carry token usage and a priced model name (so tokens and cost are not
   zero), held after its second round until the reports made while it runs
   are done (the test server keeps the third answer until the test lets it go).
3. A copy of run 1 with torn last lines, as a kill leaves them.

For each report: the HTML parses, loads nothing from the network (no src/href
attributes, no url() or @import, no fetch/XHR in the script, no http(s)://
outside text and the embedded data), and the embedded data match the run
folder's own files (attempts.jsonl, events.jsonl, world_model/, best/).
Where Chromium is installed, the page is also rendered headless: the script
must have drawn one point per attempt, the tree and the bars, and a
screenshot is saved in the work folder.
"""
import html.parser
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from e2e_common import setup

args, src, work = setup("--server")
task = src / "tests/fixtures/tasks/scale3"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"), OPENAI_API_KEY="sk-test-report")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def ksearch(*argv, timeout=600, check=True):
    r = subprocess.run([args.ksearch, *map(str, argv)], env=env, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        sys.exit(f"ksearch {' '.join(map(str, argv))} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return r


def jsonl(path):
    """The complete lines of a log, as the run store reads them."""
    data = Path(path).read_text()
    return [json.loads(l) for l in data.split("\n")[:-1] if l]


class Page(html.parser.HTMLParser):
    """Collects tags, attributes, the text of style and script blocks."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.attrs, self.styles, self.scripts, self.data_json = [], [], [], [], None
        self._in = None
        self._buf = []
        self.text = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(tag, k, v or "") for k, v in attrs]
        if tag in ("style", "script"):
            self._in = (tag, dict(attrs))
            self._buf = []

    def handle_endtag(self, tag):
        if self._in and tag == self._in[0]:
            body = "".join(self._buf)
            if tag == "style":
                self.styles.append(body)
            elif self._in[1].get("type") == "application/json":
                self.data_json = body
            else:
                self.scripts.append(body)
            self._in = None

    def handle_data(self, d):
        if self._in:
            self._buf.append(d)
        else:
            self.text.append(d)


LOADING_TAGS = {"link", "img", "iframe", "object", "embed", "audio", "video", "source", "track", "base", "frame", "image",
                "use", "meta"}
LOADING_ATTRS = {"src", "href", "xlink:href", "action", "formaction", "data", "poster", "srcset", "background",
                 "manifest", "ping", "codebase", "cite", "longdesc"}
SCRIPT_LOADS = ["fetch(", "XMLHttpRequest", "import(", "importScripts", "WebSocket", "EventSource", "sendBeacon",
                "new Image", "new Worker", "document.write", "http://", "https://", "//cdn", "src=", "href="]


def check_page(html_path, label):
    """Parses the page, checks it loads nothing, returns the embedded data."""
    raw = Path(html_path).read_text(encoding="utf-8", errors="replace")
    p = Page()
    p.feed(raw)
    p.close()
    for tag in p.tags:
        if tag in LOADING_TAGS and tag != "meta":
            fail(f"{label}: a <{tag}> element (it could load something)")
    for tag, k, v in p.attrs:
        if k.lower() in LOADING_ATTRS:
            fail(f"{label}: <{tag} {k}=\"{v}\"> loads a resource")
        if re.search(r"https?:|^//", v, re.I):
            fail(f"{label}: <{tag} {k}=\"{v}\"> names a URL")
        if tag == "meta" and k == "http-equiv":
            fail(f"{label}: a <meta http-equiv> (a refresh could load a page)")
        if k.lower() == "style" and ("url(" in v or "@import" in v):
            fail(f"{label}: an inline style loads something: {v}")
        if tag == "input" and k == "type" and v not in ("range", "checkbox", "button"):
            fail(f"{label}: an <input type={v}>")
    for s in p.styles:
        if "url(" in s or "@import" in s or "http" in s:
            fail(f"{label}: the stylesheet refers to something outside the page")
    if len(p.scripts) != 1:
        fail(f"{label}: expected one inline script, found {len(p.scripts)}")
    for s in p.scripts:
        for bad in SCRIPT_LOADS:
            if bad in s:
                fail(f"{label}: the script contains {bad!r}")
    # A page loads only through tags, attributes, CSS and script, all checked
    # above; URLs may remain in text (the source, a reason) and in the data.
    if p.data_json is None:
        sys.exit(f"{label}: no embedded data block")
    return json.loads(p.data_json), p, raw


def close(a, b, rel=1e-9):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def check_data(d, run, label, partial=False):
    """The embedded data against the run folder's own files."""
    index = jsonl(run / "attempts.jsonl")
    got = d["attempts"]
    if [(a["seq"], a["round"], a["status"], a["solution_id"]) for a in got] != \
            [(a["seq"], a["round"], a["status"], a["solution_id"]) for a in index]:
        fail(f"{label}: the plotted attempts differ from attempts.jsonl:\n  {got}\n  {index}")
    else:
        best = 0.0
        for a, i in zip(got, index):
            if not close(a["latency_ms"], i["latency_ms"]):
                fail(f"{label}: attempt {i['seq']}: latency {a['latency_ms']} vs {i['latency_ms']}")
            if i["round"] > 0 and i["status"] == "passed" and i["latency_ms"] > 0 and (best == 0 or i["latency_ms"] < best):
                best = i["latency_ms"]
            if not close(a["best_ms"], best):
                fail(f"{label}: attempt {i['seq']}: best so far {a['best_ms']}, expected {best}")
            if i["status"] != "passed" and not a.get("reason", "").startswith(i["status"]):
                fail(f"{label}: attempt {i['seq']} ({i['status']}) has no reason: {a.get('reason')!r}")
    # LLM usage: every llm_call event, tied to the round it was spent on.
    events = jsonl(run / "events.jsonl")
    calls = [e for e in events if e["type"] == "llm_call"]
    dc = d["llm"]["calls"]
    if [c["llm_seq"] for c in dc] != [e["llm_seq"] for e in calls]:
        fail(f"{label}: the LLM calls differ from events.jsonl")
    else:
        for c, e in zip(dc, calls):
            u = e["usage"]
            if (c["input_tokens"], c["output_tokens"]) != (u["input_tokens"], u["output_tokens"]) or \
                    not close(c["cost_usd"], u["cost_usd"]):
                fail(f"{label}: llm call {e['llm_seq']}: {c} vs {u}")
    rounds_done, expect = 0, {}
    for e in events:
        if e["type"] == "evaluated" and e.get("counted", True):
            rounds_done = max(rounds_done, e["round"])
        elif e["type"] == "llm_call":
            r = expect.setdefault(rounds_done + 1, [0, 0, 0.0])
            r[0] += e["usage"]["input_tokens"]
            r[1] += e["usage"]["output_tokens"]
            r[2] += e["usage"]["cost_usd"]
    per_round = {r["round"]: [r["input_tokens"], r["output_tokens"], r["cost_usd"]] for r in d["llm"]["rounds"]}
    if set(per_round) != set(expect) or any(per_round[k][:2] != expect[k][:2] or not close(per_round[k][2], expect[k][2])
                                            for k in expect):
        fail(f"{label}: tokens per round {per_round} differ from the events' {expect}")
    # World model: one snapshot per file, the same nodes.
    files = sorted((run / "world_model").glob("v*.json")) if (run / "world_model").is_dir() else []
    snaps = d["world_model"]["snapshots"]
    if [s["version"] for s in snaps] != [int(f.stem[1:]) for f in files]:
        fail(f"{label}: snapshots {[s['version'] for s in snaps]} vs files {[f.name for f in files]}")
    else:
        for s, f in zip(snaps, files):
            wm = json.loads(f.read_text())
            want = [(n["node_id"], (n.get("action") or {}).get("score_0_to_1")) for n in wm["decision_tree"]["nodes"]]
            have = [(d["world_model"]["nodes"][i]["id"], d["world_model"]["nodes"][i].get("score")) for i in s["nodes"]]
            # the root's action is empty: it has no score in the report
            want = [(i, sc if i != wm["decision_tree"].get("root_id", "root") else None) for i, sc in want]
            if want != have:
                fail(f"{label}: snapshot {f.name}: nodes {have} vs {want}")
    # Best kernel: per-workload timings and source as in best/.
    if (run / "best.json").exists():
        b = d["best"]
        ev = json.loads((run / "best" / "eval.json").read_text())
        sol = json.loads((run / "best" / "solution.json").read_text())
        if b["solution_id"] != sol["id"] or not close(b["latency_ms"], ev["latency_ms"]):
            fail(f"{label}: best {b['solution_id']} {b['latency_ms']} vs {sol['id']} {ev['latency_ms']}")
        for w, ew in zip(b["workloads"], ev["workloads"]):
            if w["name"] != ew["name"] or ("timing" in ew and not close(w["mean_ms"], ew["timing"]["mean_ms"])):
                fail(f"{label}: workload {ew['name']}: {w} vs {ew}")
            if ew.get("reference_ms", 0) > 0 and not close(w["reference_ms"], ew["reference_ms"]):
                fail(f"{label}: workload {ew['name']}: reference {w.get('reference_ms')} vs {ew['reference_ms']}")
        files = {s["path"]: (run / "best" / s["file"]).read_text() for s in sol["sources"]}
        if {s["path"]: s["content"] for s in b["sources"]} != files:
            fail(f"{label}: the best kernel's source differs from best/")
    elif d["best"] is not None and not partial:
        fail(f"{label}: a best kernel without best.json")


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def check_in_browser(html_path, d, label):
    """Renders the page headless; the script must have drawn the plots and tree."""
    exe = chromium()
    if not exe:
        print(f"{label}: Chromium not installed (Debian package `chromium`); browser rendering not checked")
        return
    common = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
              "--disable-extensions", "--disable-background-networking", "--window-size=1400,2600"]
    r = subprocess.run(common + ["--dump-dom", Path(html_path).resolve().as_uri()], capture_output=True, text=True,
                       timeout=120)
    dom = r.stdout
    if 'data-rendered="1"' not in dom:
        fail(f"{label}: the page's script did not finish in Chromium:\n{r.stderr[-2000:]}")
        return
    points = len(re.findall(r'class="pt pt-(?:passed|failed)"', dom))
    if points != len(d["attempts"]):
        fail(f"{label}: Chromium drew {points} latency points for {len(d['attempts'])} attempts")
    if d["world_model"]["snapshots"]:
        drawn = len(re.findall(r'class="wm-node', dom))
        if drawn != len(d["world_model"]["snapshots"][-1]["nodes"]):
            fail(f"{label}: Chromium drew {drawn} tree nodes, the latest snapshot has "
                 f"{len(d['world_model']['snapshots'][-1]['nodes'])}")
    if d["best"] and 'class="bar"' not in dom:
        fail(f"{label}: no workload bars drawn")
    if d["llm"]["rounds"] and "llm-round" not in dom:
        fail(f"{label}: no LLM bars drawn")
    shot = work / f"{label}.png"
    subprocess.run(common + [f"--screenshot={shot}", Path(html_path).resolve().as_uri()], capture_output=True,
                   timeout=120)
    print(f"{label}: rendered in Chromium; screenshot {shot}" if shot.exists() else f"{label}: no screenshot taken")


def report(run, label, partial=False):
    out = work / f"{label}.html"
    r = ksearch("report", run, "-o", out)
    if not out.exists():
        sys.exit(f"{label}: no report written: {r.stderr}")
    d, page, raw = check_page(out, label)
    check_data(d, run, label, partial)
    table = raw[raw.index('id="attempts-table"'):]
    table = table[:table.index("</table>")]
    if table.count("<tr") - 1 != len(d["attempts"]):
        fail(f"{label}: the attempts table has {table.count('<tr') - 1} rows for {len(d['attempts'])} attempts")
    return d, out


# 1. A world-model run answered by the scripted responder.
wm_run = work / "wm"
responder = src / "tests/fixtures/wm_e2e/responder.py"
ksearch("run", "--task", task, "--language", "cpp", "--llm", f"command:{sys.executable} {responder} {work / 'state.json'}",
        "--max-rounds", "10", "--wm-stagnation-window", "2", "--timing-cap", "0.2", "--quiet", "--run-dir", wm_run)
d, page = report(wm_run, "wm")
statuses = {n["status"] for n in d["world_model"]["nodes"]}
if not {"root", "solved", "open"} <= statuses:
    fail(f"wm: node statuses {statuses} lack root/solved/open")
if len(d["world_model"]["snapshots"]) < 3:
    fail("wm: the tree should have evolved over several snapshots")
check_in_browser(page, d, "wm")

# Graphviz: every node of the latest snapshot, every parent link.
dot = ksearch("show", wm_run, "--dot").stdout
latest = json.loads(sorted((wm_run / "world_model").glob("v*.json"))[-1].read_text())
if not dot.startswith("digraph world_model {") or not dot.rstrip().endswith("}"):
    fail(f"show --dot: not a digraph:\n{dot[:300]}")
for n in latest["decision_tree"]["nodes"]:
    if f'  "{n["node_id"]}" [' not in dot:
        fail(f"show --dot: node {n['node_id']} missing")
    if n.get("parent_id") and f'  "{n["parent_id"]}" -> "{n["node_id"]}";' not in dot:
        fail(f"show --dot: edge {n['parent_id']} -> {n['node_id']} missing")
if shutil.which("dot"):
    r = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True)
    if r.returncode != 0 or "<svg" not in r.stdout:
        fail(f"show --dot: Graphviz rejects it: {r.stderr}")
bad = ksearch("show", wm_run, "--dot", "--wm-version", "999999", check=False)
if bad.returncode == 0 or "no such snapshot" not in bad.stderr:
    fail(f"show --dot --wm-version 999999 should say there is no such snapshot: {bad.stderr}")

# 2. A greedy run over HTTP with tokens and cost, reported while it runs.
def kernel(reps, factor="3.0f", broken=False):
    sig = "std::int64_t n" + ("" if broken else ")")
    return (f"```cpp kernel.cpp\n#include <cstdint>\nvoid scale3(const float* x, float* y, {sig} {{\n"
            f"  for (int r = 0; r < {reps}; ++r) {{\n    for (std::int64_t i = 0; i < n; ++i) y[i] = {factor} * x[i];\n"
            f"    asm volatile(\"\" ::: \"memory\");\n  }}\n}}\n```\n```json launch_plan\n"
            '{"calls": [{"fn": "scale3", "args": ["x", "y", "N"]}]}\n```\n')


answers = [kernel(8), kernel(2), kernel(1, "2.0f"), kernel(1, broken=True), kernel(1), kernel(3)]
go = work / "http-go"  # answers after the second wait for it: the run is surely going while the test reports
go.unlink(missing_ok=True)
script = [{"kind": "answer", "text": t, "usage": {"input": 1000 * (i + 1), "output": 150 + 10 * i},
           **({"wait_file": str(go)} if i >= 2 else {})} for i, t in enumerate(answers)]
(work / "script.json").write_text(json.dumps(script))
server = subprocess.Popen([args.server, "--script", str(work / "script.json")], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
http_run = work / "http"
live = None
try:
    line = server.stdout.readline()
    if "listening on" not in line:
        sys.exit(f"test server did not start: {line!r}")
    base_url = line.split("listening on", 1)[1].strip()
    live = subprocess.Popen([args.ksearch, "run", "--task", str(task), "--language", "cpp", "--strategy", "greedy",
                             "--model", "gpt-5.2", "--base-url", base_url, "--max-rounds", "6", "--timing-cap", "0.2",
                             "--quiet", "--run-dir", str(http_run)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 300  # a safety net: the two free rounds take seconds
    while (not (http_run / "attempts.jsonl").exists() or len(jsonl(http_run / "attempts.jsonl")) < 2) \
            and live.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    if live.poll() is not None:
        fail("http: the run ended before a report could be made while it ran")
    before = len(jsonl(http_run / "attempts.jsonl"))
    mid = json.loads(ksearch("report", http_run, "--json").stdout)
    after = len(jsonl(http_run / "attempts.jsonl"))
    mid_page = work / "http-live.html"
    ksearch("report", http_run, "-o", mid_page)
    check_page(mid_page, "http-live")
    if mid["run"]["status"] != "running":
        fail(f"http: a report made during the run says {mid['run']['status']}")
    if not before <= len(mid["attempts"]) <= after:
        fail(f"http: the live report holds {len(mid['attempts'])} attempts; the index held {before} to {after}")
    go.touch()
    out, _ = live.communicate(timeout=600)
    if live.returncode != 0:
        sys.exit(f"http run failed ({live.returncode}):\n{out}")
finally:
    go.touch()
    if live and live.poll() is None:
        live.kill()
    server.terminate()
    server.wait(timeout=10)
d, page = report(http_run, "http")
tokens = sum(c["input_tokens"] + c["output_tokens"] for c in d["llm"]["calls"])
cost = sum(c["cost_usd"] for c in d["llm"]["calls"])
if tokens != sum(1000 * (i + 1) + 150 + 10 * i for i in range(6)) or cost <= 0:
    fail(f"http: tokens {tokens}, cost {cost}: the scripted usage is not in the report")
m = json.loads((http_run / "manifest.json").read_text())
if not close(cost, m["totals"]["llm_usage"]["cost_usd"], 1e-6):
    fail(f"http: report cost {cost} vs manifest {m['totals']['llm_usage']['cost_usd']}")
if [a["status"] for a in d["attempts"]] != ["passed", "passed", "incorrect", "compile_error", "passed", "passed"]:
    fail(f"http: statuses {[a['status'] for a in d['attempts']]}")
if d["best"]["baselines"] != ["first passing kernel (round 1)"]:
    fail(f"http: baselines {d['best']['baselines']}")
check_in_browser(page, d, "http")

# 3. Torn last lines, as a kill leaves them: the report shows what is whole.
torn = work / "torn"
shutil.copytree(wm_run, torn)
whole = len(jsonl(torn / "attempts.jsonl"))
with open(torn / "attempts.jsonl", "a") as f:
    f.write('{"seq": 99, "round": 11, "action": "half a li')
with open(torn / "events.jsonl", "a") as f:
    f.write('{"seq": 9999, "type": "llm_c')
m = json.loads((torn / "manifest.json").read_text())
m["status"] = "running"
(torn / "manifest.json").write_text(json.dumps(m))
d, page = report(torn, "torn", partial=True)
if len(d["attempts"]) != whole:
    fail(f"torn: {len(d['attempts'])} attempts shown, {whole} complete lines")
if not any("incomplete" in w for w in d["warnings"]):
    fail(f"torn: no warning about the torn line: {d['warnings']}")
if "in progress" not in page.read_text():
    fail("torn: a running run's report does not say it is in progress")

# A folder that holds no run: a clear error, no page.
bad = ksearch("report", work / "nothing-here", check=False)
if bad.returncode == 0 or "holds no run" not in bad.stderr:
    fail(f"report on a folder without a run: exit {bad.returncode}, {bad.stderr!r}")

if failures:
    sys.exit(f"{len(failures)} failure(s)")
print("reports of a world-model run, a live and finished HTTP run and a torn run: self-contained, data match the run "
      "folders; show --dot matches the tree")
