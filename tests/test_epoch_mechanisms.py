"""Epoch-level learning and the alternative update mechanisms, end to end with scripted models:
slow update, meta skill, skill-aware reflection, the autonomous learning rate, rewrite modes,
gradient accumulation, the honest gate, the skill-size cap."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import toy
from conftest import toy_config_full

from skillgrad.config import load_config
from skillgrad.rundir import read_jsonl
from skillgrad.skill import get_block, protected_spans
from skillgrad.trainer import build_trainer


def toy_run(folder: Path, overrides: Sequence[str] = (), skill: str | None = None,
            **args: Any) -> tuple[Path, dict]:
    """Train the toy family with ``toy.make_optimizer(**args)``; return (run dir, summary)."""
    cfg = toy_config_full(folder, skill, **args)
    out = folder / "run"
    summary = build_trainer(load_config(cfg, list(overrides)), out).fit()
    return out, summary


def state_of(out: Path) -> dict:
    return json.loads((out / "checkpoint.json").read_text())


def optimizer_prompts(out: Path, stage: str | None = None) -> list[str]:
    return [c["request"]["messages"][-1]["content"] for f in sorted(out.rglob("calls.jsonl"))
            for c in read_jsonl(f) if c["role"] == "optimizer" and stage in (None, c["stage"])]


def target_prompts(out: Path) -> list[str]:
    return [m["content"] for f in sorted(out.rglob("calls.jsonl")) for c in read_jsonl(f)
            if c["role"] == "target" for m in c["request"]["messages"]]


ONE_STEP_EPOCHS = ["train.num_epochs=3", "train.steps_per_epoch=1"]
GUIDANCE = ("\n<!-- SLOW_UPDATE_START -->\n- Keep answers short.\n<!-- SLOW_UPDATE_END -->\n\n"
            "<!-- APPENDIX_START -->\n- Read the context.\n<!-- APPENDIX_END -->\n")


# ----------------------------------------------------------------------------- slow update


def test_slow_update_guidance_that_quotes_a_training_item_is_refused(toy_dir: Path) -> None:
    out, _ = toy_run(toy_dir, [*ONE_STEP_EPOCHS, "optimizer.use_slow_update=true",
                               "optimizer.slow_update_samples=12"], slow="leak")
    updates = state_of(out)["epoch_updates"]
    assert updates and all(u["slow_update"]["decision"] == "refused" for u in updates)
    assert all("quotes the gold answer of training item" in u["slow_update"]["reason"]
               for u in updates)
    assert "The year asked about" not in (out / "best_skill.md").read_text()


def test_slow_update_writes_one_gated_guidance_block(toy_dir: Path) -> None:
    out, summary = toy_run(toy_dir, [*ONE_STEP_EPOCHS, "optimizer.use_slow_update=true",
                                     "optimizer.slow_update_samples=12"])
    state = state_of(out)
    updates = state["epoch_updates"]
    assert [u["epoch"] for u in updates] == [2, 3]  # from the second epoch on
    # epoch 3 compares the skill epoch 2 started from (after its slow update) with epoch 2's last
    assert updates[1]["previous_hash"] == state["epoch_start"]["2"] != updates[0]["current_hash"]
    assert updates[1]["current_hash"] == state["history"][1]["candidate_hash"]
    for u in updates:
        pairs = u["pairs"]
        assert sum(pairs.values()) == 12
        assert u["slow_update"]["decision"] in ("accept", "accept_new_best")
        assert u["slow_update"]["candidate"] > u["slow_update"]["current"]
    best = (out / "best_skill.md").read_text()
    assert [b.name for b in protected_spans(best)] == ["SLOW_UPDATE"]  # replaced, not added
    assert toy.rule("city") in get_block(best, "SLOW_UPDATE") or toy.rule("animal") in best
    assert (out / "epochs" / "e02" / "pairs.jsonl").exists()
    assert summary["epoch_updates"][0]["slow_update"]["decision"].startswith("accept")
    # the previous epoch's skill and the current one were compared on the same tasks
    rows = read_jsonl(out / "epochs" / "e02" / "pairs.jsonl")
    assert all(r["previous"]["task_id"] == r["current"]["task_id"] for r in rows)
    assert {r["kind"] for r in rows} <= {"improved", "regressed", "persistent_failure",
                                         "stable_success"}


def test_a_slow_update_the_gate_rejects_is_recorded_and_not_applied(toy_dir: Path) -> None:
    out, _ = toy_run(toy_dir, [*ONE_STEP_EPOCHS, "optimizer.use_slow_update=true"], slow="harm")
    updates = state_of(out)["epoch_updates"]
    assert updates and all(u["slow_update"]["decision"] == "reject" for u in updates)
    first = updates[0]["slow_update"]
    assert first["candidate"] <= first["current"]  # its scores are kept
    for path in (out / "best_skill.md", out / "current_skill.md"):
        assert toy.HARMFUL not in path.read_text()
    gate = json.loads((out / "epochs" / "e02" / "gate.json").read_text())
    assert gate["decision"] == "reject"
    # the rejected guidance is shown to the next epoch's analysts
    reflect = [p for p in optimizer_prompts(out, "reflect") if "slow-update guidance" in p]
    assert reflect and toy.HARMFUL in reflect[0]


def test_pair_policies_choose_what_the_optimizer_sees(toy_dir: Path) -> None:
    from skillgrad.records import RolloutResult
    from skillgrad.stages.slow_update import count, pair_up, render_pairs

    def res(i: int, ok: bool) -> RolloutResult:
        return RolloutResult(task_id=f"t{i}", messages=(), answer="", hard=float(ok),
                             soft=float(ok))

    before = [res(1, False), res(2, True), res(3, False), res(4, True)]
    after = [res(1, True), res(2, False), res(3, False), res(4, True)]
    pairs = pair_up(before, after)
    assert [p.kind for p in pairs] == ["improved", "regressed", "persistent_failure",
                                       "stable_success"]
    assert count(pairs).model_dump() == {"improved": 1, "regressed": 1,
                                         "persistent_failure": 1, "stable_success": 1}
    changed = render_pairs(pairs, "changed", 400)
    assert "task t1" in changed and "task t2" in changed and "task t3" not in changed
    unchanged = render_pairs(pairs, "unchanged", 400)
    assert "task t3" in unchanged and "task t4" in unchanged and "task t1" not in unchanged
    assert render_pairs(pairs, "mixed", 400).index("regressed") < render_pairs(
        pairs, "mixed", 400).index("improved")  # regressions first


# ----------------------------------------------------------------------------- meta skill


def test_meta_skill_reaches_the_optimizer_and_never_the_target(toy_dir: Path) -> None:
    out, summary = toy_run(toy_dir, [*ONE_STEP_EPOCHS, "optimizer.use_meta_skill=true",
                                     "optimizer.lr_control_mode=autonomous"])
    notes = (out / "meta_skill.md").read_text()
    assert "NOTE: the last epoch had 1 steps." in notes
    assert state_of(out)["meta_skill"] in notes
    assert summary["epoch_updates"][0]["meta_skill_updated"] is True
    epoch2 = [p for f in sorted((out / "steps").glob("e02-*/calls.jsonl")) for c in read_jsonl(f)
              if c["role"] == "optimizer" for p in [c["request"]["messages"][-1]["content"]]]
    assert epoch2 and all("NOTE: the last epoch" in p for p in epoch2)
    stages = {c["stage"] for f in (out / "steps").glob("e02-*/calls.jsonl")
              for c in read_jsonl(f) if c["role"] == "optimizer"}
    assert {"reflect", "select"} <= stages  # analysts, ranking and learning rate see it
    assert not any("NOTE:" in p for p in target_prompts(out))
    assert not any("NOTE:" in p.read_text() for p in (out / "skills").glob("*.md"))


# ----------------------------------------------------------------------------- skill-aware


REMINDERS = ["Check the answer format before replying.", "check the answer format before replying!",
             "Reply with the value alone."]


def test_skill_aware_reminders_go_to_a_gated_deduplicated_appendix(toy_dir: Path) -> None:
    out, summary = toy_run(toy_dir, ["optimizer.use_skill_aware_reflection=true"],
                           reminders=REMINDERS)
    best = (out / "best_skill.md").read_text()
    appendix = get_block(best, "APPENDIX")
    assert appendix is not None
    lines = [line for line in appendix.splitlines() if line.startswith("- ")]
    assert lines == ["- Check the answer format before replying.", "- Reply with the value alone."]
    first = json.loads((out / "steps" / "e01-s001" / "appendix.json").read_text())
    assert first["added"] == [REMINDERS[0], REMINDERS[2]]
    assert set(first["duplicates"]) == set(REMINDERS)  # within the step and across analysts
    # step 1's candidate (the harmful edit plus the reminders) was rejected: nothing of it stayed
    assert json.loads((out / "steps" / "e01-s001" / "gate.json").read_text())["decision"] == "reject"
    assert "APPENDIX" in (out / "steps" / "e01-s001" / "candidate.md").read_text()
    rejected = state_of(out)["history"][0]
    assert rejected["n_reminders"] == 2
    assert summary["update"]["reminders_added"] >= 2
    analyst = optimizer_prompts(out, "reflect")[0]
    assert "EXECUTION_LAPSE" in analyst and "SKILL_DEFECT" in analyst


def test_reminders_past_the_threshold_are_consolidated_by_one_call(toy_dir: Path) -> None:
    many = [f"Remember rule number {n} about {w}." for n, w in
            enumerate(["dates", "towns", "beasts", "hues"], 1)]
    out, _ = toy_run(toy_dir, ["optimizer.use_skill_aware_reflection=true",
                               "optimizer.skill_aware_consolidate_threshold=3"], reminders=many)
    report = json.loads((out / "steps" / "e01-s001" / "appendix.json").read_text())
    assert report["consolidated"] is True
    assert len(report["dropped"]) == 2
    candidate = (out / "steps" / "e01-s001" / "candidate.md").read_text()
    assert get_block(candidate, "APPENDIX").count("\n- ") == 2
    assert len(optimizer_prompts(out, "appendix")) >= 1


def test_failure_only_source_ignores_success_reminders() -> None:
    from skillgrad.records import Patch
    from skillgrad.stages.appendix import collect

    patches = [Patch(source="failure", reminders=("A.",)), Patch(source="success",
                                                                  reminders=("B.",))]
    assert collect(patches, "both") == ["A.", "B."]
    assert collect(patches, "failure_only") == ["A."]


# ----------------------------------------------------------------------------- learning rate


def test_autonomous_learning_rate_is_clamped_and_recorded(toy_dir: Path) -> None:
    out, summary = toy_run(toy_dir, ["optimizer.lr_control_mode=autonomous",
                                     "optimizer.lr_ceiling=2"], rate=7)
    history = state_of(out)["history"]
    rates = [r["rate"] for r in history if r["rate"]["applied"] or r["n_selected"]]
    assert rates and all(r["mode"] == "autonomous" and r["applied"] <= 2 for r in rates)
    assert any("clamped to" in r["reasoning"] for r in rates)
    assert all(r["confidence"] == 0.7 for r in rates)
    assert summary["update"]["lr_control"] == "autonomous"
    assert optimizer_prompts(out, "select")


def test_an_unparseable_learning_rate_reply_falls_back_to_the_schedule(toy_dir: Path) -> None:
    out, summary = toy_run(toy_dir, ["optimizer.lr_control_mode=autonomous"], rate="garbage")
    rates = [r["rate"] for r in state_of(out)["history"] if r["n_selected"]]
    assert rates
    for r in rates:
        assert r["error"] and "schedule" in r["error"]
        assert r["applied"] == min(r["schedule_budget"], 1) >= 1  # never zero
    assert summary["update"]["rate_fallbacks"] >= 1


def test_no_edit_budget_applies_everything_merged(toy_dir: Path) -> None:
    out, _ = toy_run(toy_dir, ["optimizer.lr_control_mode=none"])
    for r in state_of(out)["history"]:
        assert r["rate"]["mode"] == "none"
        assert r["n_selected"] == r["rate"]["applied"]
    assert not optimizer_prompts(out, "select")  # nothing to rank or cut


# ----------------------------------------------------------------------------- rewrite modes


def test_rewrite_from_suggestions_learns_through_the_gate(toy_dir: Path) -> None:
    out, summary = toy_run(toy_dir, ["optimizer.skill_update_mode=rewrite_from_suggestions"],
                           skill=toy.INITIAL_SKILL + GUIDANCE)
    decisions = [r["decision"] for r in state_of(out)["history"]]
    assert decisions[0] == "reject" and "accept_new_best" in decisions
    assert summary["test"]["best"]["hard"] > summary["test"]["initial"]["hard"]
    ranked = json.loads((out / "steps" / "e01-s001" / "ranked_suggestions.json").read_text())
    assert ranked["kept"][0]["type"] == "add_rule"
    rewrite = optimizer_prompts(out, "rewrite")[0]
    assert "## Protected blocks" in rewrite and "- Keep answers short." in rewrite
    best = (out / "best_skill.md").read_text()
    assert best.endswith(GUIDANCE)  # the blocks came back verbatim after the rewritten text


@pytest.mark.parametrize("mode, reason", [
    ("drop_block", "drops protected block SLOW_UPDATE"),
    ("truncated", "cut off at the token limit"),
    ("empty", "rewrite is empty"),
])
def test_a_broken_rewrite_is_refused_before_the_gate(toy_dir: Path, mode: str, reason: str) -> None:
    skill = toy.INITIAL_SKILL + GUIDANCE
    out, _ = toy_run(toy_dir, ["optimizer.skill_update_mode=rewrite_from_suggestions",
                               "train.num_epochs=1", "train.steps_per_epoch=2"],
                     skill=skill, rewrite=mode)
    history = state_of(out)["history"]
    refused = [r for r in history if r["decision"] == "refused"]
    assert refused and all(reason in r["reason"] for r in refused)
    gate = json.loads((out / "steps" / "e01-s001" / "gate.json").read_text())
    assert gate["decision"] == "refused" and gate["candidate"] is None  # never rolled out
    evals = {p.name.split("-")[0] for p in (out / "evals").iterdir()}
    assert evals == {"val", "test"}
    assert len(list((out / "evals").glob("val-*"))) == 1  # only the initial skill was scored


def test_full_rewrite_candidates_compete_on_the_selection_split(toy_dir: Path) -> None:
    out, summary = toy_run(toy_dir, ["optimizer.skill_update_mode=full_rewrite_minibatch",
                                     "train.num_epochs=1"])
    rows = json.loads((out / "steps" / "e01-s001" / "rewrites.json").read_text())
    scored = [r for r in rows if r["refused"] is None]
    assert len(scored) >= 2
    gate = json.loads((out / "steps" / "e01-s001" / "gate.json").read_text())
    assert gate["candidate"] == max(r["val"] for r in scored)
    assert state_of(out)["history"][0]["changes"] == ["whole-document rewrite"]
    assert summary["test"]["best"]["hard"] > summary["test"]["initial"]["hard"]


# ----------------------------------------------------------------------------- accumulation


def test_accumulation_gathers_several_batches_before_one_update(toy_dir: Path) -> None:
    out, _ = toy_run(toy_dir, ["train.accumulation=2", "train.batch_size=4",
                               "train.num_epochs=1", "train.steps_per_epoch=2"])
    step = out / "steps" / "e01-s001"
    rollouts = read_jsonl(step / "rollouts.jsonl")
    assert len(rollouts) == 8 and len({r["task_id"] for r in rollouts}) == 8
    calls = [c for c in read_jsonl(step / "calls.jsonl") if c["role"] == "optimizer"]
    reflect_at = [i for i, c in enumerate(calls) if c["stage"] == "reflect"]
    others = [i for i, c in enumerate(calls) if c["stage"] != "reflect"]
    assert reflect_at and all(i > max(reflect_at) for i in others)  # one update, after all
    step2 = {r["task_id"] for r in read_jsonl(out / "steps" / "e01-s002" / "rollouts.jsonl")}
    assert not step2 & {r["task_id"] for r in rollouts}  # the next batches follow on


# ----------------------------------------------------------------------------- gate and size


def test_honest_gate_is_used_and_stated(toy_dir: Path) -> None:
    out, summary = toy_run(toy_dir, ["evaluation.gate_test=sign", "evaluation.gate_alpha=0.2"])
    assert "sign test" in summary["gate"]["rule"] and "0.2" in summary["gate"]["rule"]
    gates = [json.loads(p.read_text()) for p in sorted((out / "steps").glob("*/gate.json"))]
    judged = [g for g in gates if g["decision"] != "skip"]
    assert judged and all(g["p_value"] is not None or g["mean_gain"] <= 0 for g in judged)
    assert all(g["p_value"] <= 0.2 for g in judged if g["decision"].startswith("accept"))


def test_a_candidate_over_the_size_cap_is_refused_and_the_optimizer_is_told(toy_dir: Path) -> None:
    from skillgrad.skill import estimate_tokens

    cap = estimate_tokens(toy.INITIAL_SKILL) + 2  # room for no new line
    out, _ = toy_run(toy_dir, [f"optimizer.max_skill_tokens={cap}", "train.num_epochs=1"])
    history = state_of(out)["history"]
    assert all(r["decision"] == "refused" and "size cap" in r["reason"] for r in history)
    assert len(list((out / "evals").glob("val-*"))) == 1
    analyst = optimizer_prompts(out, "reflect")[0]
    assert f"a version over {cap} tokens is refused" in analyst
    later = optimizer_prompts(out, "reflect")[-1]
    assert "over the size cap" in later  # the refusal is in the rejected buffer


def test_an_initial_skill_over_the_cap_is_an_error(toy_dir: Path) -> None:
    from skillgrad.errors import DataError

    with pytest.raises(DataError, match="over optimizer.max_skill_tokens"):
        toy_run(toy_dir, ["optimizer.max_skill_tokens=16"])


def test_an_epoch_with_accumulation_covers_the_training_split_once(toy_dir: Path) -> None:
    out, summary = toy_run(toy_dir, ["train.accumulation=2", "train.batch_size=4",
                                     "train.num_epochs=1", "train.steps_per_epoch=null"])
    assert summary["steps"] == 3  # ceil(18 train tasks / (4 x 2))
    seen = [r["task_id"] for p in sorted((out / "steps").glob("e01-*/rollouts.jsonl"))
            for r in read_jsonl(p)]
    assert len(seen) == 24 and len(set(seen)) == 18
