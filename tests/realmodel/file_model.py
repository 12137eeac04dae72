#!/usr/bin/env python3
"""A `--llm command:` program that hands every prompt to whoever answers
files: a person, or a language model driving a shell. It is how the
real-model transcripts in tests/fixtures/realmodel/ were recorded.

Usage: ksearch run ... --llm command:"python3 tests/realmodel/file_model.py DIR" --llm-timeout 3600

For each request it writes DIR/NNN.prompt.md (the kind, the system message
and the prompt, as the model would receive them) and waits until
DIR/NNN.answer.md exists and DIR/NNN.answer.done marks it complete, then
prints the answer on stdout. NNN counts the requests of DIR from 001, so
parallel requests get their own numbers. A file DIR/STOP makes every waiting
request fail, which ends the run as an outage would.
"""
import fcntl
import os
import sys
import time


def next_number(folder):
    """The next request's number, taken under a lock: parallel calls each get one."""
    with open(os.path.join(folder, ".counter.lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = os.path.join(folder, ".counter")
        n = int(open(path).read()) + 1 if os.path.exists(path) else 1
        with open(path, "w") as f:
            f.write(str(n))
        return n


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: file_model.py DIR")
    folder = sys.argv[1]
    os.makedirs(folder, exist_ok=True)
    prompt = sys.stdin.read()
    kind = os.environ.get("KSEARCH_PROMPT_KIND", "")
    system = os.environ.get("KSEARCH_SYSTEM_PROMPT", "")
    n = next_number(folder)
    stem = os.path.join(folder, f"{n:03d}")
    tmp = stem + ".prompt.md.tmp"
    with open(tmp, "w") as f:
        f.write(f"<!-- request {n:03d}, kind: {kind} -->\n\n# System message\n\n{system}\n\n# Prompt\n\n{prompt}")
    os.replace(tmp, stem + ".prompt.md")
    while not os.path.exists(stem + ".answer.done"):
        if os.path.exists(os.path.join(folder, "STOP")):
            sys.exit("file_model: stopped (DIR/STOP exists)")
        time.sleep(0.5)
    with open(stem + ".answer.md") as f:
        sys.stdout.write(f.read())


if __name__ == "__main__":
    main()
