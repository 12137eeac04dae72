"""What the demonstrations' scripted models share (examples/*/demo_responder.py).

A scripted model is a `ksearch run --llm command:...` program: the prompt on
stdin, its kind in $KSEARCH_PROMPT_KIND, a state file (argv[1]) that carries
counters from one call to the next. Every answer it gives was written by hand;
each demonstration supplies its own world-model answers and kernels, and
`serve` hands them out by the prompt's kind.
"""
import json
import os
import re
import sys
from pathlib import Path


def impacts(mem, reg, comp, notes, hw_notes):
    return {"memory_bandwidth": {"rating_0_to_10": mem, "risk": "medium", "notes": notes[0]},
            "register_pressure": {"rating_0_to_10": reg, "risk": "medium", "notes": notes[1]},
            "compute_intensity_and_hw_fit": {"rating_0_to_10": comp, "risk": "medium", "notes": notes[2],
                                             "hw_notes": hw_notes}}


def action_node(nid, parent, decision, choice, title, description, difficulty, score, factor, rationale, notes, imp):
    return {"node_id": nid, "parent_id": parent, "node_type": "decision", "decision": decision, "choice": choice,
            "impacts": imp, "overall_rating_0_to_10": round(score * 10), "confidence_0_to_1": 0.5,
            "last_updated_round": 0, "notes": notes,
            "action": {"title": title, "description": description, "difficulty_1_to_5": difficulty,
                       "score_0_to_1": score, "expected_vs_baseline_factor": factor, "rationale": rationale}}


def serve(init_tree, refine, propose, code):
    """Answers one prompt and saves the state.

    init_tree()           the wm_init answer (a tree);
    refine(nid)           (notes for node nid, the child to insert under it) after nid produced a kernel;
    propose(nid, parent)  the node proposed as the nid-th proposal under `parent`;
    code                  the kernel answers, handed out in order (the last one repeats).
    """
    state_file = Path(sys.argv[1])
    kind = os.environ.get("KSEARCH_PROMPT_KIND", "")
    prompt = sys.stdin.read()
    try:
        state = json.loads(state_file.read_text())
    except FileNotFoundError:
        state = {"code": 0}
    if kind == "wm_init":
        print(json.dumps(init_tree()))
    elif kind == "wm_refine":
        nid = re.search(r'The action "([^"]+)" just produced', prompt).group(1)
        notes, child = refine(nid)
        print(json.dumps({"ops": [
            {"op": "update_node", "node_id": nid, "patch": {"notes": notes, "action": {"score_0_to_1": 0.3}}},
            {"op": "insert_node", "parent_id": nid, "node": child}]}))
    elif kind == "wm_too_hard":
        nid = re.search(r'The action "([^"]+)" produced no passing kernel', prompt).group(1)
        print(json.dumps({"ops": [{"op": "update_node", "node_id": nid, "patch": {"action": {"score_0_to_1": 0.1}}}]}))
    elif kind == "wm_propose":
        m = re.search(r'CRITICAL: the best node "([^"]+)"', prompt)
        parent = m.group(1) if m else "root"
        node = propose(f"p{state.get('propose', 0)}", parent)
        state["propose"] = state.get("propose", 0) + 1
        print(json.dumps({"ops": [{"op": "insert_node", "parent_id": parent, "node": node}]}))
    elif kind in ("generate", "debug", "improve"):
        i = state["code"]
        state["code"] = i + 1
        print(code[min(i, len(code) - 1)]())
    else:
        sys.stderr.write(f"demo_responder: unknown kind {kind!r}\n")
        sys.exit(1)
    state_file.write_text(json.dumps(state))
