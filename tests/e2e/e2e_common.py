"""The command line every end-to-end script takes, and its fresh work folder."""
import argparse
import shutil
from pathlib import Path


def setup(*more, **helps):
    """Parses --ksearch, --source-dir, --work and the options named in `more`
    (all required; `helps` maps an option's attribute name to its help), then
    empties the work folder. Returns (args, source folder, work folder)."""
    ap = argparse.ArgumentParser()
    for name in ("--ksearch", *more, "--source-dir", "--work"):
        ap.add_argument(name, required=True, help=helps.get(name.lstrip("-").replace("-", "_")))
    args = ap.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return args, Path(args.source_dir), work
