"""The whole loop end to end with scripted models: accept, accept_new_best, reject, skip."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import toy
from conftest import toy_config

from skillgrad.config import load_config
from skillgrad.rundir import read_jsonl
from skillgrad.trainer import build_trainer


def train(cfg_path: Path, out: Path, overrides: tuple[str, ...] = ()) -> dict:
    return build_trainer(load_config(cfg_path, overrides), out).fit()


def decisions(out: Path) -> list[str]:
    state = json.loads((out / "checkpoint.json").read_text())
    return [r["decision"] for r in state["history"]]


def test_gated_run_rejects_harmful_edit_then_learns_rules(toy_dir: Path) -> None:
    out = toy_dir / "run"
    summary = train(toy_config(toy_dir), out)

    seq = decisions(out)
    assert seq[0] == "reject"  # the harmful refusal line is proposed first and fails validation
    assert "accept_new_best" in seq
    best = (out / "best_skill.md").read_text()
    assert toy.HARMFUL not in best
    for topic in ("year", "city", "animal"):
        assert toy.rule(topic) in best
    assert summary["test"]["best"]["hard"] == 1.0
    assert summary["test"]["initial"]["hard"] < 0.5
    assert summary["test_delta"]["best"]["hard"] > 0.5
    assert summary["gate"]["use_gate"] is True
    assert summary["best_step"] == max(i + 1 for i, d in enumerate(seq) if d == "accept_new_best")
    assert summary["models"]["target"]["calls"] > 0
    assert summary["models"]["optimizer"]["stages"]["reflect"]["calls"] > 0


def test_rejected_edits_are_shown_to_later_reflection(toy_dir: Path) -> None:
    out = toy_dir / "run"
    train(toy_config(toy_dir), out)
    step2 = out / "steps" / "e01-s002"
    prompts = [c["request"]["messages"][0]["content"] for c in read_jsonl(step2 / "calls.jsonl")
               if c["role"] == "optimizer" and c["stage"] == "reflect"]
    assert any("rejected by validation" in p and toy.HARMFUL in p for p in prompts)
    proposed = json.loads((step2 / "patches.json").read_text())
    assert all(e["content"] != toy.HARMFUL for p in proposed for e in p["edits"])
    gate1 = json.loads((out / "steps" / "e01-s001" / "gate.json").read_text())
    assert gate1["decision"] == "reject" and gate1["candidate"] < gate1["current"] + 1e-9


def test_rejected_buffer_is_cleared_at_epoch_end(toy_dir: Path) -> None:
    out = toy_dir / "run"
    train(toy_config(toy_dir, train={"num_epochs": 2, "steps_per_epoch": 1}), out)
    # epoch 2 no longer remembers the rejection, so the optimizer proposes the line again
    epoch2 = json.loads((out / "steps" / "e02-s001" / "patches.json").read_text())
    assert any(e["content"] == toy.HARMFUL for p in epoch2 for e in p["edits"])


def test_gate_off_adopts_every_candidate_and_reaches_plain_accept(toy_dir: Path) -> None:
    out = toy_dir / "run"
    summary = train(toy_config(toy_dir, evaluation={"use_gate": False}), out)
    seq = decisions(out)
    assert seq[0] == "accept"  # the harmful line is adopted: the gate is off
    assert seq[1] == "accept"  # deleting it beats current (0) but only ties best (initial)
    assert summary["gate"]["use_gate"] is False
    assert "GATE OFF" in summary["gate"]["rule"]
    gate1 = json.loads((out / "steps" / "e01-s001" / "gate.json").read_text())
    assert gate1["gated"] is False and "gate off" in gate1["reason"]


def test_a_skill_scored_before_is_not_rolled_out_again(toy_dir: Path) -> None:
    out = toy_dir / "run"
    summary = train(toy_config(toy_dir, evaluation={"use_gate": False}), out)
    # step 2 returns to the initial skill (same content hash): its val score is reused
    state = json.loads((out / "checkpoint.json").read_text())
    assert state["history"][1]["candidate_hash"] == state["initial_hash"]
    n_val = len(read_jsonl(next((out / "evals").glob("val-*")) / "rollouts.jsonl"))
    distinct_val = len(list((out / "evals").glob("val-*")))
    assert summary["models"]["target"]["stages"]["eval_val"]["calls"] == n_val * distinct_val


def test_unparseable_optimizer_output_is_recorded_and_the_step_goes_on(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir)
    text = cfg.read_text().replace("function: toy:optimizer", "default: 'I would add a rule.'")
    cfg.write_text(text)
    out = toy_dir / "run"
    # Never stopped for it here (optimizer.max_unusable_steps: see test_reliability_models.py).
    summary = train(cfg, out, ("optimizer.max_unusable_steps=null",))
    patches = json.loads((out / "steps" / "e01-s001" / "patches.json").read_text())
    assert patches and all(p["error"] and p["raw"] == "I would add a rule." for p in patches)
    assert set(decisions(out)) == {"skip"}
    gate = json.loads((out / "steps" / "e01-s001" / "gate.json").read_text())
    assert gate["reason"] == "no edit was proposed; the skill is unchanged"
    assert summary["edits"]["parse_errors"] > 0
    assert (out / "best_skill.md").read_text() == toy.INITIAL_SKILL


def test_a_step_whose_edits_cannot_apply_is_skipped_and_says_why(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir)
    reply = json.dumps({"reasoning": "r", "edits": [
        {"op": "insert_after", "anchor": "a line the skill does not have", "content": "- New.",
         "support": 2, "rationale": "r"}]})
    cfg.write_text(cfg.read_text().replace("function: toy:optimizer", f"default: '{reply}'"))
    out = toy_dir / "run"
    train(cfg, out)
    assert set(decisions(out)) == {"skip"}
    gate = json.loads((out / "steps" / "e01-s001" / "gate.json").read_text())
    assert gate["reason"].startswith("no change could be applied (1 edit skipped: anchor not "
                                     "found")
    assert (out / "best_skill.md").read_text() == toy.INITIAL_SKILL


def test_run_directory_layout(toy_dir: Path) -> None:
    out = toy_dir / "run"
    train(toy_config(toy_dir), out)
    for name in ("config.yaml", "checkpoint.json", "events.jsonl", "best_skill.md",
                 "summary.json", "run.json"):
        assert (out / name).is_file(), name
    step = out / "steps" / "e01-s001"
    for name in ("rollouts.jsonl", "patches.json", "merged_patch.json", "ranked_edits.json",
                 "candidate.md", "apply_report.json", "gate.json", "calls.jsonl", "record.json"):
        assert (step / name).is_file(), name
    events = [e["event"] for e in read_jsonl(out / "events.jsonl")]
    assert events[0] == "run_start" and events[-1] == "run_end"
    assert events.count("step_start") == events.count("step_end") == 6
    skills = {p.read_text() for p in (out / "skills").glob("*.md")}
    assert toy.INITIAL_SKILL in skills and (out / "best_skill.md").read_text() in skills


def test_two_trainers_share_a_process(toy_dir: Path, tmp_path: Path) -> None:
    cfg = toy_config(toy_dir)
    ref = train(cfg, tmp_path / "ref")
    outs = [tmp_path / "a", tmp_path / "b"]
    threads = [threading.Thread(target=train, args=(cfg, o)) for o in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for o in outs:
        assert (o / "best_skill.md").read_bytes() == (tmp_path / "ref" / "best_skill.md").read_bytes()
        summary = json.loads((o / "summary.json").read_text())
        assert summary["test"] == ref["test"]
        assert summary["models"]["target"]["calls"] == ref["models"]["target"]["calls"]
