"""The outcome-blind failure judge (``gradient.failure_judge``): a reviewer that never sees the
expected result names how each failed episode went wrong, and the analysts see it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest
from conftest import toy_config

from skillgrad.build import build_environment
from skillgrad.cli.runs import rollout_lines
from skillgrad.config import load_config
from skillgrad.errors import ConfigError
from skillgrad.models.scripted import ScriptedModel
from skillgrad.plan import plan_run
from skillgrad.records import Message, RolloutResult, Task
from skillgrad.runview.rollouts import read_rollouts
from skillgrad.stages.judge import MODES, JudgeSettings, ModeName, episode_facts, judge_failures
from skillgrad.stages.render import render_contrast, render_trajectories
from skillgrad.testing.doubles import scripted_optimizer
from skillgrad.trainer import build_trainer

LOOP = 'ACTION: read {"range": "A1:C9"}\nACTION: write {"A1": "x"}'


def _looping(task_id: str = "t1", secret: str = "SECRET-4711", times: int = 2) -> RolloutResult:
    """A failed episode that sends one two-action reply ``times`` times over; its expected
    result, score and the scorer's account each hold ``secret``."""
    messages = [Message(role="system", content="Act one line at a time."),
                Message(role="user", content="Task: copy the header row.")]
    for _ in range(times):
        messages += [Message(role="assistant", content=LOOP),
                     Message(role="user", content="OBSERVATION: A1 = ID\nNOT RUN: 1 more line")]
    return RolloutResult(task_id=task_id, messages=tuple(messages), answer="", hard=0.0,
                         soft=0.125, reason=f"A1 expected {secret}, got empty", turns=times,
                         expected=secret)


def _solved(task_id: str = "t2") -> RolloutResult:
    return RolloutResult(task_id=task_id, answer="42", hard=1.0, soft=1.0, messages=(
        Message(role="user", content="What is six times seven?"),
        Message(role="assistant", content="42")))


def test_the_reviewer_sees_the_episode_and_its_counts_but_not_its_outcome() -> None:
    model = ScriptedModel(default={"mode": "repeated itself", "evidence": "ACTION: read"})
    out = judge_failures([_looping(), _solved()], model, JudgeSettings(workers=1))
    assert len(model.calls) == 1  # the solved episode is not reviewed
    prompt = model.calls[0].messages[0].text()
    assert "SECRET-4711" not in prompt and "0.125" not in prompt and "got empty" not in prompt
    assert "Act one line at a time." in prompt  # what the agent was told to do
    assert LOOP in prompt and "NOT RUN: 1 more line" in prompt
    assert "- It sent one reply 2 times in a row, unchanged." in prompt
    assert all(f"- {name}: " in prompt for name in MODES)
    assert model.calls[0].kind == "judge"
    assert out[0].metadata["failure_mode"] == {"mode": "repeated itself",
                                               "evidence": "ACTION: read"}
    assert "failure_mode" not in out[1].metadata


def test_a_mode_outside_the_list_is_an_error_kept_with_the_episode_and_shown_nowhere() -> None:
    model = ScriptedModel(default={"mode": "it was lazy", "evidence": ""})
    [out] = judge_failures([_looping()], model, JudgeSettings(workers=1))
    verdict = out.metadata["failure_mode"]
    assert set(verdict) == {"error"} and verdict["error"]
    text = render_contrast([out], {"t1": Task(id="t1", prompt="p", reference="x")}, 2000)
    assert "reviewer" not in text


def test_the_analysts_see_each_mode_and_how_many_failed_each_way() -> None:
    model = ScriptedModel(default={"mode": "repeated itself", "evidence": "ACTION: read"})
    batch = judge_failures([_looping("a"), _looping("b"), _looping("c")], model,
                           JudgeSettings(workers=1))
    tasks = {t: Task(id=t, prompt="p", reference={"cells": {"A1": "ID"}}) for t in "abc"}
    contrast = render_contrast(batch, tasks, 2000)
    assert "- 3 of 3 episodes, as a reviewer named them: repeated itself\n" in contrast
    assert contrast.count('without seeing the expected result: repeated itself ("ACTION: '
                          'read")') == 3
    trajectories = render_trajectories(batch, 2000)
    assert trajectories.startswith("- 3 of 3 episodes, as a reviewer named them: repeated "
                                   "itself\n")
    # Without a judgement neither shows a word of it.
    assert "reviewer" not in render_contrast([_looping()], {"t1": tasks["a"]}, 2000)
    assert "reviewer" not in render_trajectories([_looping()], 2000)


def test_none_visible_is_not_counted_and_carries_no_quote() -> None:
    model = ScriptedModel(default={"mode": "none visible", "evidence": "whatever"})
    [out] = judge_failures([_looping()], model, JudgeSettings(workers=1))
    assert out.metadata["failure_mode"] == {"mode": "none visible", "evidence": ""}
    text = render_trajectories([out], 2000)
    assert "as a reviewer named them" not in text
    assert text.count("without seeing the expected result: none visible\n") == 1


def test_the_facts_count_replies_calls_and_repeats() -> None:
    one = RolloutResult(task_id="x", answer="", hard=0.0, soft=0.0, messages=(
        Message(role="user", content="q"), Message(role="assistant", content="")))
    assert episode_facts(one) == ("- The agent sent 1 reply and called tools 0 times.\n"
                                  "- Its last reply is empty.")
    assert episode_facts(_looping(times=3)).splitlines() == [
        "- The agent sent 3 replies and called tools 0 times.",
        "- It sent one reply 3 times in a row, unchanged."]


def test_what_the_counts_establish_is_named_without_a_call() -> None:
    """A small reviewer names a loop "reasoning slip" as readily as anything: a reply sent
    three times unchanged is a loop by count, and in a multi-turn environment a lone reply
    with no tool call is an answer given before any work."""
    model = ScriptedModel(default={"mode": "reasoning slip", "evidence": ""})
    lone = RolloutResult(task_id="l", answer="done", hard=0.0, soft=0.0, messages=(
        Message(role="user", content="Task: sort the rows."),
        Message(role="assistant", content="ANSWER: done\nI sorted them.")))
    loop, answered = judge_failures([_looping(times=3), lone], model,
                                    JudgeSettings(workers=1, multi_turn=True))
    assert loop.metadata["failure_mode"] == {"mode": "repeated itself",
                                             "evidence": 'ACTION: read {"range": "A1:C9"}'}
    assert answered.metadata["failure_mode"] == {"mode": "answered before acting",
                                                 "evidence": "ANSWER: done"}
    assert not model.calls
    # Single-turn, one reply is all there is: the reviewer is asked.
    [single] = judge_failures([lone], model, JudgeSettings(workers=1))
    assert single.metadata["failure_mode"] == {"mode": "reasoning slip", "evidence": ""}
    assert len(model.calls) == 1


@pytest.mark.parametrize(("evidence", "kept"), [
    ('ACTION: write {"A1": "x"}', 'ACTION: write {"A1": "x"}'),
    ('"ACTION:   read"', "ACTION: read"),
    ("The agent wrote the header twice instead of once.", ""),
])
def test_only_the_agents_own_words_pass_as_evidence(evidence: str, kept: str) -> None:
    model = ScriptedModel(default={"mode": "broke the protocol", "evidence": evidence})
    [out] = judge_failures([_looping()], model, JudgeSettings(workers=1))
    assert out.metadata["failure_mode"] == {"mode": "broke the protocol", "evidence": kept}


def _judging(folder: Path, **gradient: Any) -> Path:
    return toy_config(folder, train={"num_epochs": 1, "steps_per_epoch": 1},
                      gradient={"minibatch_size": 100, "failure_only": True,
                                "proposal_form": "rules", **gradient})


def test_a_run_with_the_judge_keeps_each_verdict_and_shows_it_to_the_analyst(
        toy_dir: Path) -> None:
    trainer = build_trainer(load_config(_judging(toy_dir, failure_judge=True)), toy_dir / "run")
    trainer.fit()
    step = toy_dir / "run" / "steps" / "e01-s001"
    rollouts = [json.loads(line) for line in (step / "rollouts.jsonl").read_text().splitlines()]
    failed = [r for r in rollouts if r["hard"] < 1.0]
    assert failed and all(r["metadata"]["failure_mode"] == {"mode": "none visible",
                                                            "evidence": ""} for r in failed)
    assert all("failure_mode" not in r["metadata"] for r in rollouts if r["hard"] >= 1.0)
    calls = [json.loads(line) for line in (step / "calls.jsonl").read_text().splitlines()]
    assert [c["request"]["kind"] for c in calls if c["stage"] == "judge"] == [
        "judge"] * len(failed)
    analyst = next(c for c in calls if c["request"]["kind"] == "analyst_rules")
    assert analyst["request"]["messages"][0]["content"].count(
        "without seeing the expected result: none visible") == len(failed)
    assert trainer.state is not None and "judge" in trainer.state.stage_seconds
    shown = "\n".join(rollout_lines(read_rollouts(toy_dir / "run", step="e01-s001"), 100))
    assert shown.count("  mode:     none visible\n") == len(failed)
    # Off by default: no review is asked for.
    build_trainer(load_config(_judging(toy_dir)), toy_dir / "plain").fit()
    plain = (toy_dir / "plain" / "steps" / "e01-s001" / "calls.jsonl").read_text()
    assert '"judge"' not in plain and "reviewer" not in plain


def test_the_plan_counts_one_review_per_rollout(toy_dir: Path) -> None:
    judging = load_config(_judging(toy_dir, failure_judge=True))
    plain = load_config(_judging(toy_dir))
    judged = plan_run(judging, build_environment(judging))
    rows = {(x.role, x.stage): x.calls for x in judged.lines}
    assert rows[("optimizer", "judge")] == rows[("target", "rollout")]
    assert ("optimizer", "judge") not in {
        (x.role, x.stage) for x in plan_run(plain, build_environment(plain)).lines}


def test_the_reply_shape_allows_exactly_the_listed_modes() -> None:
    assert set(get_args(ModeName)) == set(MODES)


def test_the_judge_key_takes_a_boolean_only(toy_dir: Path) -> None:
    with pytest.raises(ConfigError, match="failure_judge"):
        load_config(_judging(toy_dir, failure_judge="sometimes"))


def test_the_scripted_optimizer_names_a_loop_from_the_counted_facts() -> None:
    model = ScriptedModel(fn=scripted_optimizer(lambda *_: {}))
    [loop] = judge_failures([_looping()], model, JudgeSettings(workers=1))
    assert loop.metadata["failure_mode"] == {"mode": "repeated itself",
                                             "evidence": 'ACTION: read {"range": "A1:C9"}'}
