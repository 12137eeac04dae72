#!/usr/bin/env python3
"""The files `ksearch export` writes, checked without a GPU.

For every shipped TriMul candidate (GPUMode submission), a native KernelBench
task (ModelNew) and a FlashInfer-shaped fixture task (Solution JSON):
- the file parses as Python and defines the harness's entry point;
- every embedded cubin is a CUDA ELF image for the recorded architecture
  (ELF64, little-endian, OS ABI CUDA, machine EM_CUDA, the SM in e_flags),
  matches its recorded SHA-256, and equals, byte for byte, a fresh NVRTC build
  of the recorded program with the recorded options (compiled here through
  the runtime's own NVRTC layer, no precompiled headers, no cache);
- the cubin sits in the evaluator's cache under the evaluator's key, and a
  second export reuses it ("evaluator cache");
- every kernel the plan names leads to an entry function of the cubin;
- the NVRTC version and options are recorded.
Then bad input: unknown format, a host solution, a non-GPUMode task for
--format gpumode, a solution that does not compile, --arch nonsense.

  test_export_files.py --ksearch KSEARCH --source-dir SRC --work DIR
"""
import argparse
import ast
import base64
import glob
import hashlib
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--ksearch", required=True)
ap.add_argument("--source-dir", required=True)
ap.add_argument("--work", required=True)
args = ap.parse_args()

spec = importlib.util.spec_from_file_location(
    "ksearch_runtime", os.path.join(args.source_dir, "lib/export/runtime/ksearch_runtime.py"))
rt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rt)
NVRTC = rt.Nvrtc()

failures = []


def expect(what, ok, detail=""):
    if not ok:
        failures.append(what)
        print("FAIL:", what, detail)
    else:
        print("ok:", what)


work = args.work
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
cache = os.path.join(work, "cache")
src = args.source_dir


def ksearch(*a):
    return subprocess.run([args.ksearch] + list(a), capture_output=True, text=True)


def export(fmt, task, solution, out, *extra, cache_dir=None):
    p = ksearch("export", "--format", fmt, "--task", task, "--solution", solution, "--cache-dir", cache_dir or cache,
                "-o", out, *extra)
    if p.returncode != 0:
        sys.exit("export failed: %s\n%s" % (" ".join(p.args), p.stderr))
    return p


def manifest_of(python_text, name="MANIFEST"):
    """The JSON literal assigned to `name` (MANIFEST = load_json(r'''...''')), read from the syntax tree."""
    tree = ast.parse(python_text)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            call = node.value
            if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Constant):
                return json.loads(call.args[0].value)
    raise AssertionError("no %s literal" % name)


def functions_of(python_text):
    """Module-level functions and classes."""
    tree = ast.parse(python_text)
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = node
    return out


def elf_entries(image):
    """Entry functions of a CUDA ELF (FUNC symbols with the CUDA entry flag 0x10 in st_other)."""
    shoff, = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3a)
    sections = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for s in sections:
        if s[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sections[s[6]]
        for off in range(s[4], s[4] + s[5], s[9]):
            st_name, st_info, st_other = struct.unpack_from("<IBB", image, off)
            if st_info & 0xf == 2 and st_other & 0x10:
                start = strtab[4] + st_name
                names.append(image[start:image.index(b"\0", start)].decode())
    return names


def check_bundle(label, manifest, arch, plan_names):
    expect("%s: manifest of a libksearch export, arch %s" % (label, arch),
           manifest.get("format") == "ksearch-export" and manifest.get("arch") == arch)
    nv = manifest["nvrtc"]
    expect("%s: NVRTC version and options recorded" % label,
           nv["version"] == NVRTC.version and "-arch=" + arch in nv["options"] and "-default-device" in nv["options"]
           and nv["toolkit_include_dirs"], json.dumps(nv)[:300])
    sm = int("".join(c for c in arch[3:] if c.isdigit()))
    for i, b in enumerate(manifest["builds"]):
        image = base64.b64decode(b["cubin"])
        expect("%s build %d: SHA-256 and size as recorded" % (label, i),
               hashlib.sha256(image).hexdigest() == b["cubin_sha256"] and len(image) == b["cubin_bytes"])
        ident = image[:16]
        e_machine, = struct.unpack_from("<H", image, 18)
        e_flags, = struct.unpack_from("<I", image, 0x30)
        # CUDA ELF ABI version 8 (CUDA 12.x, 13.x) keeps the SM in bits 8-15 of e_flags.
        expect("%s build %d: a CUDA ELF image for sm_%d" % (label, i, sm),
               ident[:4] == b"\x7fELF" and ident[4] == 2 and ident[5] == 1 and ident[7] == 0x41 and ident[8] == 8 and
               e_machine == 190 and (e_flags >> 8) & 0xff == sm, "ident %s machine %d flags %#x" % (
                   ident.hex(), e_machine, e_flags))
        fresh, lowered = NVRTC.compile(b["program"], nv["options"], b["name_expressions"])
        expect("%s build %d: equals a fresh NVRTC build with the recorded options (%d bytes)" % (label, i, len(image)),
               fresh == image)
        entries = elf_entries(image)
        build = rt.Build(b)
        missing = [n for n in plan_names if build.symbol_for(n) not in entries]
        expect("%s build %d: every plan kernel is an entry of the cubin (%s)" % (label, i, ", ".join(plan_names)),
               not missing and all(lowered.get(e) == b["lowered_names"].get(e) for e in b["name_expressions"]),
               "missing %s; entries %s" % (missing, entries))
        cached = glob.glob(os.path.join(cache, "cuda", arch, "*", "*.cubin"))
        expect("%s build %d: the cubin is in the evaluator's cache" % (label, i),
               any(open(c, "rb").read() == image for c in cached))


# ---- GPUMode: every shipped TriMul candidate
candidates = sorted(glob.glob(os.path.join(src, "examples/trimul/candidates/v*.md")))
expect("four TriMul candidates ship", len(candidates) == 4, str(candidates))
for path in candidates:
    label = os.path.basename(path)
    out = os.path.join(work, label + ".submission.py")
    export("gpumode", "gpumode/trimul", path, out)
    text = open(out).read()
    try:
        ast.parse(text)
        parsed = True
    except SyntaxError as e:
        parsed = False
        print(e)
    expect("%s: the submission parses as Python" % label, parsed)
    fns = functions_of(text)
    ck = fns.get("custom_kernel")
    expect("%s: defines custom_kernel(data)" % label, ck is not None and [a.arg for a in ck.args.args] == ["data"])
    manifest = manifest_of(text)
    names = rt.LaunchPlan(manifest["plan"]).kernel_names()
    check_bundle(label, manifest, "sm_90a", names)
    for key in ("norm.weight", "norm.bias", "left_proj.weight", "right_proj.weight", "left_gate.weight",
                "right_gate.weight", "out_gate.weight", "to_out_norm.weight", "to_out_norm.bias", "to_out.weight"):
        if "\"%s\"" % key not in text:
            expect("%s: reference.py weight %s is read" % (label, key), False)
    expect("%s: the task's tensors in order" % label,
           [t["name"] for t in manifest["task"]["tensors"]] == ["x", "mask", "norm_weight", "norm_bias", "left_proj",
                                                                "right_proj", "left_gate", "right_gate", "out_gate",
                                                                "to_out_norm_weight", "to_out_norm_bias", "to_out",
                                                                "out"])

# The second export of a candidate reuses the cubin the first one left in the cache.
v4 = [c for c in candidates if "v4" in c][0]
p = export("gpumode", "gpumode/trimul", v4, os.path.join(work, "v4_again.py"))
again = manifest_of(open(os.path.join(work, "v4_again.py")).read())
first = manifest_of(open(os.path.join(work, os.path.basename(v4) + ".submission.py")).read())
expect("a second export takes the cubin from the evaluator's cache",
       again["builds"][0]["origin"] == "evaluator cache" and first["builds"][0]["origin"] == "NVRTC" and
       again["builds"][0]["cubin_sha256"] == first["builds"][0]["cubin_sha256"] and "cached" in p.stdout, p.stdout)
# Another architecture: a cubin for it, recorded as such.
out = os.path.join(work, "v4_sm100a.py")
export("gpumode", "gpumode/trimul", v4, out, "--arch", "sm_100a")
m100 = manifest_of(open(out).read())
check_bundle("v4 for sm_100a", m100, "sm_100a", rt.LaunchPlan(m100["plan"]).kernel_names())

# ---- KernelBench: native level-1 tasks
for task in ("kernelbench/level1/19_ReLU", "kernelbench/level1/40_LayerNorm", "kernelbench/level1/1_Square_matrix_multiplication_"):
    tspec = json.loads(ksearch("tasks", "--spec", task).stdout)
    sol = os.path.join(work, task.split("/")[-1] + ".json")
    json.dump(tspec["starting_points"][0], open(sol, "w"))
    out = os.path.join(work, task.split("/")[-1] + "_modelnew.py")
    export("kernelbench", task, sol, out)
    text = open(out).read()
    fns = functions_of(text)
    expect("%s: the module parses and defines ModelNew with forward" % task,
           "ModelNew" in fns and any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in fns["ModelNew"].body))
    manifest = manifest_of(text)
    check_bundle(task, manifest, "sm_90a", rt.LaunchPlan(manifest["plan"]).kernel_names())
    expect("%s: the task's tensors, in the documented order" % task,
           [t["name"] for t in manifest["task"]["tensors"]] == [t["name"] for t in tspec["tensors"]])

# ---- FlashInfer-Bench: Solution JSONs


def fib_schema():
    """flashinfer_bench.data.Solution, where the package can be imported: installed with its dependencies (the
    GPU machine), or its data models alone from a folder named by $KSEARCH_FIB_SITE (e.g. `pip install --target
    DIR --no-deps flashinfer-bench==0.1.2` plus pydantic: the package's own __init__ needs PyTorch, its data
    models do not)."""
    try:
        from flashinfer_bench.data import Solution as FibSolution
        return FibSolution
    except ImportError:
        pass
    site = os.environ.get("KSEARCH_FIB_SITE")
    if not site:
        return None
    import types
    sys.path.insert(0, site)
    for name in ("flashinfer_bench", "flashinfer_bench.data"):
        sys.modules.pop(name, None)
        m = types.ModuleType(name)
        m.__path__ = [os.path.join(site, *name.split("."))]
        sys.modules[name] = m
    try:
        from flashinfer_bench.data.solution import Solution as FibSolution
        return FibSolution
    except ImportError as e:
        print("note: $KSEARCH_FIB_SITE=%s: %s" % (site, e))
        return None


FIB_SOLUTION = fib_schema()
if FIB_SOLUTION is None:
    print("note: flashinfer_bench is not importable here (set KSEARCH_FIB_SITE); its schema is checked by the rules "
          "below (benchmark-suites.md section 3.3)")


def check_fib_solution(label, sol, name, definition, author, params):
    """The Solution schema's rules (benchmark-suites.md 3.3, flashinfer_bench/data/solution.py), and what
    FlashInfer-Bench's python builder checks of the entry point (its parameter count, in DPS)."""
    spec_ = sol.get("spec", {})
    paths = [s["path"] for s in sol.get("sources", [])]
    expect("%s: a Solution with the schema's fields" % label,
           set(sol) == {"name", "definition", "author", "description", "spec", "sources"} and
           sol.get("name") == name and sol.get("definition") == definition and sol.get("author") == author and
           isinstance(sol.get("description"), str) and
           spec_.get("language") == "python" and spec_.get("target_hardware") == ["NVIDIA_H100"] and
           spec_.get("entry_point") == "main.py::run" and spec_.get("entry_point").count("::") == 1 and
           spec_.get("dependencies") == [] and spec_.get("destination_passing_style") is True, json.dumps(
               {k: v for k, v in sol.items() if k != "sources"}))
    expect("%s: sources are unique relative paths with the entry file and non-empty content" % label,
           "main.py" in paths and len(set(paths)) == len(paths) and
           all(not os.path.isabs(p) and ".." not in p.split("/") for p in paths) and
           all(isinstance(s["content"], str) and s["content"] for s in sol["sources"]), str(paths))
    main = [s["content"] for s in sol["sources"] if s["path"] == "main.py"][0]
    run = functions_of(main).get("run")
    expect("%s: run(%s) in definition order, nothing else" % (label, ", ".join(params)),
           run is not None and [a.arg for a in run.args.args] == params and not run.args.vararg and
           not run.args.kwonlyargs and not run.args.defaults, ast.dump(run.args) if run else "no run")
    if FIB_SOLUTION is not None:
        try:
            FIB_SOLUTION.model_validate(sol)
            expect("%s: flashinfer_bench.data.Solution accepts it" % label, True)
        except Exception as e:  # pydantic's ValidationError
            expect("%s: flashinfer_bench.data.Solution accepts it" % label, False, str(e)[:600])
    return main


# The fixture task shaped like a definition: per-shape builds and a variant.
fi = os.path.join(src, "tests/export/fixtures/flashinfer_rmsnorm")
out = os.path.join(work, "rmsnorm_solution.json")
export("flashinfer", fi, os.path.join(fi, "solution.json"), out, "--author", "test", "--name", "rmsnorm_ks")
sol = json.load(open(out))
main = check_fib_solution("flashinfer fixture", sol, "rmsnorm_ks", "rmsnorm_h128", "test",
                          ["hidden_states", "weight", "output"])
manifest = manifest_of(main)
check_bundle("flashinfer fixture", manifest, "sm_90a", rt.LaunchPlan(manifest["plan"]).kernel_names())
if FIB_SOLUTION is not None:  # the schema check can fail: a Solution without its entry file is refused
    try:
        FIB_SOLUTION.model_validate(dict(sol, sources=[s for s in sol["sources"] if s["path"] != "main.py"]))
        refused = False
    except Exception:
        refused = True
    expect("flashinfer: flashinfer_bench.data.Solution refuses a Solution without main.py", refused)
expect("flashinfer: one build per parameter set the workloads use, shapes mapped to them",
       len(manifest["builds"]) == 2 and [w["build"] for w in manifest["task"]["workloads"]] == [0, 0, 0, 1] and
       manifest["default_build"] == 0 and [b["params"] for b in manifest["builds"]] == [{"ROWS": 2}, {"ROWS": 8}])

# The four built-in FlashInfer-Bench tasks: the starting kernel of each, scalar inputs passed by position.
FLASHINFER = {
    "gqa_paged_decode_h32_kv4_d128_ps1": ["q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "sm_scale"],
    "mla_paged_decode_h16_ckv512_kpe64_ps1": ["q_nope", "q_pe", "ckv_cache", "kpe_cache", "kv_indptr", "kv_indices",
                                              "sm_scale"],
    "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1": ["q_nope", "q_pe", "ckv_cache", "kpe_cache", "qo_indptr",
                                                      "kv_indptr", "kv_indices", "sm_scale"],
    "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048": [
        "routing_logits", "routing_bias", "hidden_states", "hidden_states_scale", "gemm1_weights",
        "gemm1_weights_scale", "gemm2_weights", "gemm2_weights_scale", "local_expert_offset",
        "routed_scaling_factor"],
}
for definition, inputs in FLASHINFER.items():
    task = "flashinfer/" + definition
    tspec = json.loads(ksearch("tasks", "--spec", task).stdout)
    start = os.path.join(work, definition + "_start.json")
    json.dump(tspec["starting_points"][0], open(start, "w"))
    out = os.path.join(work, definition + ".solution.json")
    export("flashinfer", task, start, out)
    sol = json.load(open(out))
    outputs = [t["name"] for t in tspec["tensors"] if t.get("role") == "output"]
    expect("%s: the definition's inputs as the spec lists them (the test's list is current)" % definition,
           [t["name"] for t in tspec["tensors"] if t.get("role") != "output"] == inputs)
    main = check_fib_solution(definition, sol, definition + "_ksearch_" + sol["name"].rsplit("_", 1)[-1], definition,
                              "libksearch", inputs + outputs)
    manifest = manifest_of(main)
    check_bundle(definition, manifest, "sm_90a", rt.LaunchPlan(manifest["plan"]).kernel_names())
    scalars = [t["name"] for t in tspec["tensors"] if t["shape"] is None]
    expect("%s: the manifest's tensors in definition order, scalars (%s) with shape null and their values on "
           "every workload" % (definition, ", ".join(scalars)),
           [t["name"] for t in manifest["task"]["tensors"]] == inputs + outputs and
           [t["name"] for t in manifest["task"]["tensors"] if t["shape"] is None] == scalars and
           all(sorted(w["scalars"]) == sorted(scalars) for w in manifest["task"]["workloads"]) and
           len(manifest["task"]["workloads"]) == len(tspec["workloads"]))
    kernel_sources = [s for s in sol["sources"] if s["path"].startswith("kernel/")]
    expect("%s: kernel/ holds the device code the cubin was built from" % definition,
           [s["content"] for s in kernel_sources] == [f["content"] for f in tspec["starting_points"][0]["sources"]])
    # The runtime reads the manifest: scalars known as such, everything else a tensor.
    rs = rt.Solution(manifest)
    expect("%s: the runtime sees %d tensor inputs, %d scalar inputs, %d outputs" % (
        definition, len(inputs) - len(scalars), len(scalars), len(outputs)),
        [t.name for t in rs.scalar_inputs] == scalars and len(rs.tensor_inputs) == len(inputs) - len(scalars) and
        [t.name for t in rs.outputs] == outputs)

# A definition of a FlashInfer-Trace dataset (tests/fixtures/flashinfer_trace): the Solution names it, and the
# manifest holds the scalar values its workloads give.
ds_def = os.path.join(src, "tests/fixtures/flashinfer_trace/definitions/gqa_paged",
                      "gqa_paged_decode_h32_kv4_d128_ps1.json")
out = os.path.join(work, "dataset_gqa.solution.json")
export("flashinfer", ds_def, os.path.join(work, "gqa_paged_decode_h32_kv4_d128_ps1_start.json"), out)
sol = json.load(open(out))
manifest = manifest_of([x["content"] for x in sol["sources"] if x["path"] == "main.py"][0])
want = {}
for line in open(os.path.join(src, "tests/fixtures/flashinfer_trace/workloads/gqa_paged/"
                                    "gqa_paged_decode_h32_kv4_d128_ps1.jsonl")):
    w = json.loads(line)["workload"]
    if "sm_scale" in w["inputs"]:
        want[w["uuid"]] = struct.unpack("<f", struct.pack("<f", w["inputs"]["sm_scale"]["value"]))[0]
got = {w["name"]: w["scalars"]["sm_scale"] for w in manifest["task"]["workloads"]}
expect("flashinfer dataset definition: the Solution's definition, the workloads' sm_scale (as f32) in the manifest",
       sol["definition"] == "gqa_paged_decode_h32_kv4_d128_ps1" and want and
       all(got.get(k) == v for k, v in want.items()), "%s vs %s" % (got, want))

# ---- the bundle format: the manifest alone, readable by the runtime
out = os.path.join(work, "bundle.json")
export("bundle", "gpumode/trimul", v4, out)
b = json.load(open(out))
expect("bundle: the manifest with its cubins, loadable by the runtime",
       b["builds"][0]["cubin_sha256"] == first["builds"][0]["cubin_sha256"] and rt.Solution(b).task_name ==
       "gpumode/trimul")

# ---- a run folder: its best solution, task, architecture, flags and cache (written by hand in the run format)
import re  # noqa: E402
md = open(v4).read()
code = re.search(r"```cuda kernel\.cu\n(.*?)```", md, re.S).group(1)
plan = json.loads(re.search(r"```json launch_plan\n(.*?)```", md, re.S).group(1))
run = os.path.join(work, "run")
os.makedirs(run)
json.dump({"format": "ksearch-run", "format_version": 1,
           "task": {"name": "gpumode/trimul", "reference": "gpumode/trimul", "custom": False},
           "evaluator": {"cuda_arch": "", "cache_dir": cache, "options": {"extra_compile_flags": ["-DKS_RUN_FLAG=1"]}},
           "device": {"backend": "cuda", "name": "NVIDIA H100 80GB HBM3", "arch": "sm_90a"}},
          open(os.path.join(run, "manifest.json"), "w"))
json.dump({"round": 4, "solution_id": "", "eval": {"status": "passed", "latency_ms": 1.862,
                                                   "device": "NVIDIA H100 80GB HBM3 (sm_90)", "workloads": []},
           "solution": {"name": "v4 from a run", "language": "cuda",
                        "sources": [{"path": "kernel.cu", "content": code}], "launch_plan": plan}},
          open(os.path.join(run, "best.json"), "w"))
p = ksearch("export", "--format", "gpumode", "--solution", run, "-o", os.path.join(work, "from_run.py"))
expect("a run folder exports its best solution", p.returncode == 0, p.stderr)
if p.returncode == 0:
    m = manifest_of(open(os.path.join(work, "from_run.py")).read())
    expect("the run's task, flags, cache and evaluation are used and recorded",
           m["task"]["name"] == "gpumode/trimul" and "-DKS_RUN_FLAG=1" in m["nvrtc"]["options"] and
           m["evaluated"]["latency_ms"] == 1.862 and m["solution"]["name"] == "v4 from a run" and
           "gpumode/trimul" in p.stdout, json.dumps(m["nvrtc"]["options"]))
os.remove(os.path.join(run, "best.json"))
p = ksearch("export", "--format", "gpumode", "--solution", run, "-o", os.path.join(work, "none.py"))
expect("a run without a best solution is refused, saying so", p.returncode != 0 and "no best solution" in p.stderr,
       p.stderr)

# ---- bad input
host_sol = os.path.join(work, "host.json")
json.dump({"language": "cpp", "sources": [{"path": "k.cpp", "content": "void f() {}"}],
           "launch_plan": {"calls": [{"fn": "f", "args": []}]}}, open(host_sol, "w"))
broken = os.path.join(work, "broken.json")
json.dump({"language": "cuda", "sources": [{"path": "k.cu", "content": "this is not CUDA"}],
           "launch_plan": {"kernels": [{"name": "k", "grid": [1], "block": [1], "args": []}]}}, open(broken, "w"))
cases = [
    (["--format", "pdf", "--task", "gpumode/trimul", "--solution", v4], 2, "unknown export format \"pdf\""),
    (["--format", "gpumode", "--task", "kernelbench/level1/19_ReLU", "--solution",
      os.path.join(work, "19_ReLU.json")], 2, "gpumode/trimul"),
    (["--format", "kernelbench", "--task", "examples/matmul", "--solution", host_sol], None, "only CUDA solutions"),
    (["--format", "gpumode", "--task", "gpumode/trimul", "--solution", broken], 1, "does not compile"),
    (["--format", "gpumode", "--task", "gpumode/trimul", "--solution", v4, "--arch", "hopper"], 2, "not an NVRTC target"),
    (["--format", "gpumode", "--solution", v4], 2, "needs --task"),
    (["--format", "gpumode", "--task", "gpumode/trimul", "--solution", os.path.join(work, "nope.md")], None, "nope.md"),
]
for argv, code, words in cases:
    p = ksearch("export", "--cache-dir", cache, "-o", os.path.join(work, "bad.out"), *argv)
    ok = p.returncode != 0 and (code is None or p.returncode == code) and words in p.stderr
    expect("bad input %s: exit %d, says %r" % (argv[:2] + argv[-2:], p.returncode, words), ok, p.stderr[-400:])

# A Python solution is its own submission in its suite's convention: the module, unchanged.
py_sub = os.path.join(work, "triton_submission.py")
py_text = ("import torch\nimport triton\nfrom task import input_t, output_t\n\n\n"
           "def custom_kernel(data: input_t) -> output_t:\n    x, mask, weights, config = data\n    return x\n")
open(py_sub, "w").write(py_text)
out = os.path.join(work, "triton_export.py")
p = ksearch("export", "--cache-dir", cache, "--format", "gpumode", "--task", "gpumode/trimul", "--solution", py_sub,
            "-o", out)
expect("a triton solution exports as the GPUMode submission it is, byte for byte",
       p.returncode == 0 and open(out).read() == py_text and "triton module" in p.stdout, p.stdout + p.stderr)
torch_sub = os.path.join(work, "torch_submission.py")
open(torch_sub, "w").write(py_text.replace("import triton\n", ""))
p = ksearch("export", "--cache-dir", cache, "--format", "gpumode", "--task", "gpumode/trimul", "--solution", torch_sub,
            "-o", out)
expect("a module that does not use Triton is a python solution", p.returncode == 0 and "python module" in p.stdout,
       p.stdout + p.stderr)
p = ksearch("export", "--cache-dir", cache, "--format", "kernelbench", "--task", "gpumode/trimul", "--solution", py_sub,
            "-o", os.path.join(work, "bad.out"))
expect("a triton solution is refused by the other formats, saying which it takes",
       p.returncode == 2 and "exports as --format gpumode" in p.stderr, p.stderr[-400:])

# KernelBench: a ModelNew module is the file KernelBench's eval takes.
modelnew = os.path.join(work, "model_new.py")
mn_text = ("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
           "        super().__init__()\n\n    def forward(self, x):\n        return torch.relu(x)\n")
open(modelnew, "w").write(mn_text)
out = os.path.join(work, "model_new_export.py")
p = ksearch("export", "--format", "kernelbench", "--task", "kernelbench/level1/19_ReLU", "--solution", modelnew, "-o", out)
expect("a python ModelNew exports as the KernelBench module it is, byte for byte",
       p.returncode == 0 and open(out).read() == mn_text and "python module" in p.stdout, p.stdout + p.stderr)
p = ksearch("export", "--format", "flashinfer", "--task", "kernelbench/level1/19_ReLU", "--solution", modelnew,
            "-o", os.path.join(work, "bad.out"))
expect("a ModelNew is refused by the FlashInfer format", p.returncode == 2 and "--format kernelbench" in p.stderr,
       p.stderr[-400:])

# FlashInfer-Bench: the sources as a Solution, with the style its run() has, or the one the Solution states.
gqa = "flashinfer/gqa_paged_decode_h32_kv4_d128_ps1"
gqa_in = "q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale"
for style, signature, dps in (("value-returning", gqa_in, False), ("destination-passing", gqa_in + ", output, lse", True),
                              ("destination-passing, annotated", gqa_in.replace("sm_scale", "sm_scale: float = 1.0")
                               + ", output: 'torch.Tensor', lse", True)):
    src_file = os.path.join(work, "gqa_triton.py")
    code = "import torch\nimport triton\n\n\ndef run(%s):\n    pass  # (a kernel would go here)\n" % signature
    open(src_file, "w").write(code)
    out = os.path.join(work, "gqa_triton.json")
    p = ksearch("export", "--format", "flashinfer", "--task", gqa, "--solution", src_file, "-o", out, "--author", "t")
    ok = p.returncode == 0
    sol = json.load(open(out)) if ok else {}
    spec_ = sol.get("spec", {})
    expect("flashinfer: a %s triton run() exports as a triton Solution saying so" % style,
           ok and spec_.get("language") == "triton" and spec_.get("entry_point") == "main.py::run" and
           spec_.get("destination_passing_style") is dps and sol.get("sources") == [{"path": "main.py", "content": code}],
           p.stderr[-400:] + json.dumps(spec_))
    if ok and FIB_SOLUTION is not None:
        try:
            FIB_SOLUTION.model_validate(sol)
            expect("flashinfer: flashinfer_bench.data.Solution accepts the %s triton Solution" % style, True)
        except Exception as e:
            expect("flashinfer: flashinfer_bench.data.Solution accepts the %s triton Solution" % style, False, str(e)[:600])
    # Read back: the same solution (entry point and style now stated), exported again to the same file.
    if ok:
        again = os.path.join(work, "gqa_triton_again.json")
        p = ksearch("export", "--format", "flashinfer", "--task", gqa, "--solution", out, "-o", again, "--author", "t",
                    "--name", sol["name"])
        expect("flashinfer: the %s Solution, read back and exported again, is the same file" % style,
               p.returncode == 0 and open(again).read() == open(out).read(), p.stderr[-400:])
open(src_file, "w").write("import triton\n\n\ndef run(q, k_cache):\n    pass\n")
p = ksearch("export", "--format", "flashinfer", "--task", gqa, "--solution", src_file, "-o", os.path.join(work, "bad.out"))
expect("flashinfer: a run() with neither count of parameters is refused, with the counts",
       p.returncode == 2 and "should take 8 parameters" in p.stderr and "and takes 2" in p.stderr, p.stderr[-400:])

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("export files: all checks passed")
