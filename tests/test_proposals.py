"""Several sampled proposals per step, screened on the step's training tasks, and failure
analysts that write plain rules from each reply set beside its expected answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import toy
import yaml
from conftest import toy_config

from skillgrad.config import load_config
from skillgrad.errors import ConfigError
from skillgrad.records import Message, RolloutResult, Task, render_expected
from skillgrad.settings import sample_temperature
from skillgrad.stages.relation import compare_reply, number_widths, widths_line
from skillgrad.stages.render import (
    reason_clauses,
    render_contrast,
    render_setting,
)
from skillgrad.stages.replies import RulesReply, rule_edit, split_rules
from skillgrad.testing import scripted_optimizer
from skillgrad.trainer import build_trainer


def _sampled(folder: Path, helpful: bool = True, proposals: int = 3, steps: int = 1) -> Path:
    return toy_config(
        folder,
        model={"target": {"backend": "scripted", "function": "toy:target"},
               "optimizer": {"backend": "scripted", "function": "toy:make_sampled_optimizer",
                             "function_args": {"helpful": helpful}}},
        train={"num_epochs": 1, "steps_per_epoch": steps},
        gradient={"minibatch_size": 100, "failure_only": True, "proposals": proposals,
                  "proposal_form": "rules"})


def _train(cfg: Path, out: Path) -> Any:
    trainer = build_trainer(load_config(cfg), out)
    trainer.fit()
    return trainer


def _calls(step: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (step / "calls.jsonl").read_text().splitlines()]


def test_screening_keeps_the_proposal_that_helps_the_training_batch(toy_dir: Path) -> None:
    _train(_sampled(toy_dir), toy_dir / "run")
    step = toy_dir / "run" / "steps" / "e01-s001"
    screening = json.loads((step / "screen.json").read_text())
    rows = screening["rows"]
    assert [r["status"] for r in rows] == ["scored", "scored", "scored"]
    current = screening["current"]
    assert rows[0]["score"] == pytest.approx(current)  # the greeting changes nothing scored
    assert rows[1]["score"] < current             # the harmful line breaks every answer
    assert rows[2]["score"] > current             # the topic rule fixes its failures
    assert screening["chosen"] == 2
    assert json.loads((step / "gate.json").read_text())["decision"] == "accept_new_best"
    best = (toy_dir / "run" / "best_skill.md").read_text()
    assert f"- {toy.rule('year')}" in best and toy.HARMFUL not in best and toy.POLITE not in best
    # Three sampled analysts, each hotter; each candidate rolled out once on the batch.
    temps = [c["request"]["temperature"] for c in _calls(step)
             if c["request"]["kind"] == "analyst_rules"]
    assert temps == sorted(set(temps)) and len(temps) == 3
    rolled = [c for c in _calls(step) if c["stage"] == "screen"]
    batch = [c for c in _calls(step) if c["stage"] == "rollout"]
    assert len(rolled) == 3 * len(batch)


def test_a_step_whose_proposals_all_fail_the_batch_is_skipped_without_validation(
        toy_dir: Path) -> None:
    trainer = _train(_sampled(toy_dir, helpful=False), toy_dir / "run")
    step = toy_dir / "run" / "steps" / "e01-s001"
    gate = json.loads((step / "gate.json").read_text())
    assert gate["decision"] == "skip"
    assert gate["reason"].startswith("no proposal beat the current skill on the step's")
    assert json.loads((step / "screen.json").read_text())["chosen"] is None
    # Only the initial skill was scored on the selection split.
    assert [c for c in _calls(step) if c["stage"] == "eval_val"] == []
    assert (toy_dir / "run" / "best_skill.md").read_text() == toy.INITIAL_SKILL
    assert trainer.state is not None and trainer.state.history[0].decision == "skip"


def test_one_proposal_screens_nothing(toy_dir: Path) -> None:
    _train(_sampled(toy_dir, proposals=1), toy_dir / "run")
    step = toy_dir / "run" / "steps" / "e01-s001"
    assert not (step / "screen.json").exists()
    assert not [c for c in _calls(step) if c["stage"] == "screen"]
    # The greedy proposal changes nothing scored: the gate rejects it on validation.
    assert json.loads((step / "gate.json").read_text())["decision"] == "reject"


def test_proposals_replay_to_the_same_skills(toy_dir: Path, tmp_path: Path) -> None:
    cfg = _sampled(toy_dir)
    _train(cfg, tmp_path / "a")
    _train(cfg, tmp_path / "b")
    for name in ("best_skill.md", "steps/e01-s001/screen.json", "steps/e01-s001/candidate.md"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()


def test_sampled_proposals_have_distinct_temperatures(toy_dir: Path) -> None:
    cfg = load_config(toy_config(toy_dir, optimizer={"learning_rate": 1, "temperature": 0.8}))
    temps = [sample_temperature(cfg.config, k) for k in range(8)]
    assert temps[0] == 0.8 and len(set(temps)) == 8 and temps == sorted(temps)
    cold = load_config(toy_config(toy_dir))
    assert sample_temperature(cold.config, 0) == 0.0 and sample_temperature(cold.config, 1) == 0.7


def test_the_rules_prompt_sets_each_reply_beside_its_expected_answer(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir, train={"num_epochs": 1, "steps_per_epoch": 1},
                     gradient={"minibatch_size": 100, "failure_only": True,
                               "proposal_form": "rules"})
    _train(cfg, toy_dir / "run")
    step = toy_dir / "run" / "steps" / "e01-s001"
    (call,) = [c for c in _calls(step) if c["request"]["kind"] == "analyst_rules"]
    prompt = call["request"]["messages"][0]["content"]
    assert ("Question: What is the year of item 2?\nIts reply: Answer: 1902 probably\n"
            "Its answer, as read from the reply: 1902 probably\nExpected: '1902'\n"
            "So: its reply contains an expected answer plus 1 more word.\n") in prompt
    assert "Result:" not in prompt and "FAILED:" not in prompt  # no scorer wording
    assert "What the agent is told after the skill" not in prompt  # it is told the skill only
    # The rule (the toy's first try for years) becomes one bullet at the skill's end.
    candidate = (step / "candidate.md").read_text()
    assert candidate.rstrip().endswith(f"\n\n- {toy.HARMFUL}")


def test_the_analyst_sees_the_tools_the_agent_was_told_of_after_its_skill() -> None:
    """An agent with tools reads, after its skill, which tools it has and how to call them;
    the analyst is shown that once, so a rule can say which tool to call and how."""
    from skillgrad.envs.tools import Tool, run_episode
    from skillgrad.models.scripted import ScriptedModel
    search = Tool("search", "Search the documents.",
                  {"type": "object", "properties": {"query": {"type": "string"}},
                   "required": ["query"]}, lambda query: "nothing")
    skill = "# Documents\n\nLook things up before you answer.\n"

    def result(skill_text: str) -> RolloutResult:
        episode = run_episode(ScriptedModel(["ANSWER: Paris"]), skill_text, "Where?", [search])
        return RolloutResult(task_id="a", answer="Paris", hard=0.0, soft=0.0,
                             messages=list(episode.messages))
    block = render_setting([result(skill)], skill)
    assert block.startswith("\n## What the agent is told after the skill\n")
    assert "- search(query: string): Search the documents." in block
    assert 'ACTION: search {"query": "..."}' in block and "Look things up" not in block
    package = skill + "\n<!-- skillgrad:file references/how.md -->\n# How\n\n1. Search.\n"
    shown = render_setting([result(package)], package)
    assert "references/how.md: How" in shown and "read_skill_file" in shown
    alone = RolloutResult(task_id="a", answer="x", hard=0.0, soft=0.0,
                          messages=[Message(role="system", content=skill),
                                    Message(role="user", content="q")])
    assert render_setting([alone], skill) == ""  # the skill alone: nothing more to show


def test_render_contrast_shows_task_tools_reply_and_expected() -> None:
    result = RolloutResult(task_id="a", answer="It is Paris, the capital.", hard=0.0, soft=0.4,
                           messages=[Message(role="system", content="SKILL"),
                                     Message(role="user", content="Where is the Louvre?"),
                                     Message(role="assistant", content="",
                                             tool_calls=[{"name": "search", "arguments": "{}"}]),
                                     Message(role="tool", content="found"),
                                     Message(role="assistant", content="It is Paris.")],
                           reason="the answer carries extra words")
    task = Task(id="a", prompt="Where is the Louvre?", reference=["Paris", "paris"])
    text = render_contrast([result], {"a": task}, 800)
    assert "Where is the Louvre?" in text and "SKILL" not in text
    assert "The agent called 1 tools: " in text
    assert "Its reply: It is Paris.\nIts answer, as read from the reply: It is Paris, the" in text
    assert "Expected: 'Paris' or 'paris'" in text and "extra words" not in text
    assert "So: its reply contains an expected answer plus 4 more words." in text
    assert text.startswith("- 1 of 1 replies contain an expected answer plus more words\n")
    assert render_expected({"targets": {"B2": 42, "B3": "x"}}) == "B2: 42; B3: x"
    assert render_expected({"cells": ["A1"], "values": [3]}) == "cells: 'A1'; values: 3"
    assert render_expected(7) == "7" and render_expected(None) == ""


def test_render_contrast_shows_the_route_of_a_multi_turn_episode() -> None:
    """An agent that acts in text over several turns (WebShop's search[...] / click[...]):
    the analyst sees the turns that led to the reply, not the reply alone."""
    turns = ["search[red canvas shoes size 9]", "click[B0SHOE1]", "click[size 9]",
             "click[buy now]"]
    messages = [Message(role="system", content="SKILL"),
                Message(role="user", content="Instruction: buy red canvas shoes, size 9")]
    for n, action in enumerate(turns):
        messages += [Message(role="assistant", content=action),
                     Message(role="user", content=f"page {n + 1}")]
    result = RolloutResult(task_id="w", answer="click[buy now]", hard=0.0, soft=0.5,
                           messages=messages, turns=4)
    task = Task(id="w", prompt="buy red canvas shoes", reference={"asin": "B0SHOE2"})
    text = render_contrast([result], {"w": task}, 1600)
    assert ("Its 3 turns before the reply: search[red canvas shoes size 9] | click[B0SHOE1] | "
            "click[size 9]\n") in text
    single = result.model_copy(update={"messages": messages[:3]})
    assert "turns before the reply" not in render_contrast([single], {"w": task}, 1600)


def test_an_episode_with_no_answer_to_compare_shows_what_went_wrong_counted() -> None:
    """A purchase (or a workbook) is no answer to set the reply beside: the analyst sees the
    environment's account of each episode, and its parts counted over the batch, where
    "shares no word" would have said nothing."""
    def episode(task_id: str, reason: str) -> RolloutResult:
        messages = [Message(role="system", content="SKILL"),
                    Message(role="user", content=f"Instruction: buy {task_id}")]
        for action in ("search[shoes]", "click[Next >]", "click[Next >]"):
            messages += [Message(role="assistant", content=action),
                         Message(role="user", content="page")]
        return RolloutResult(task_id=task_id, answer="search[shoes] ; click[Next >] ; "
                             "click[Next >]", hard=0.0, soft=0.0, messages=messages,
                             turns=3, reason=reason)
    batch = [episode("a", "no purchase within 8 turns (Buy Now was never clicked); searched 1 "
                          "times (first: 'shoes'); never opened an item; 3 of 8 actions were "
                          "invalid (e.g. '(no action)')"),
             episode("b", "no purchase within 8 turns (Buy Now was never clicked); searched 1 "
                          "times (first: 'boots'); never opened an item; 2 of 8 actions were "
                          "invalid (e.g. 'Next >')"),
             episode("c", "bought the wrong size")]
    tasks = {t: Task(id=t, prompt="buy", reference={"asin": "B0X", "attributes": ["red"]})
             for t in "abc"}
    text = render_contrast(batch, tasks, 1600)
    head = text.split("\n\n")[0].splitlines()
    assert head == ["- 2 of 3 episodes: no purchase within 8 turns",
                    "- 2 of 3 episodes: searched 1 times",
                    "- 2 of 3 episodes: never opened an item",
                    "- 2 of 3 episodes: N of N actions were invalid (N varies)"]
    assert ("What went wrong: no purchase within 8 turns (Buy Now was never clicked); searched 1 "
            "times (first: 'shoes')") in text
    assert "What went wrong: bought the wrong size" in text
    assert "Its reply: click[Next >]\n" in text
    assert "as read from the reply" not in text  # the route already shows the actions
    assert reason_clauses("a (b (c)); d") == {"a": "a", "d": "d"}
    assert list(reason_clauses("A1 expected 'x', got empty; and 9 more; no cell changed")) == [
        "A1 expected '…', got empty", "no cell changed"]  # a list's tail is no failure


def test_a_rule_becomes_an_appended_bullet() -> None:
    edit = rule_edit("  - Reply with   the short phrase alone. ", 3, "why")
    assert (edit.op, edit.content, edit.support, edit.anchor) == (
        "append", "- Reply with the short phrase alone.", 3, "")


@pytest.mark.parametrize(("rule", "content"), [
    # A rule written without the full stop ends its sentence (reading-set analysts' words).
    ("Remove the quotes from the reply", "- Remove the quotes from the reply."),
    ("Round to 2", "- Round to 2."),
    # One that ends on a mark, or stops mid-sentence, is left as it was written.
    ("End with `Answer: <your answer>`", "- End with `Answer: <your answer>`"),
    ("Write the date (DD/MM/YYYY)", "- Write the date (DD/MM/YYYY)"),
    ("Is the unit right?", "- Is the unit right?"),
    ("If the question names a unit, use", "- If the question names a unit, use"),
    ("Answer: <number> grams", "- Answer: <number> grams"),
    ("Before you answer, remove the", "- Before you answer, remove the"),
])
def test_a_rule_that_ends_on_a_word_ends_its_sentence(rule: str, content: str) -> None:
    assert rule_edit(rule, 1).content == content


@pytest.mark.parametrize(("rule", "content"), [
    # Written by the unit-conversion set's analysts as an order to edit the skill.
    ("- Add '- Use the unit symbol 'mL' for millilitres.'",
     "- Use the unit symbol 'mL' for millilitres."),
    ("Append '- Use the unit symbol for every unit.'", "- Use the unit symbol for every unit."),
    ('Add the line: "- Reply with the number only."', "- Reply with the number only."),
    # A rule that only names something to add is no such order.
    ("Add the unit symbol after the number.", "- Add the unit symbol after the number."),
    ("Include '- ' before each item of a list.", "- Include '- ' before each item of a list."),
])
def test_a_rule_that_orders_a_bullet_added_is_that_bullet(rule: str, content: str) -> None:
    assert rule_edit(rule, 1).content == content


@pytest.mark.parametrize(("rule", "content"), [
    ("Reply with the expected answer only.", "- Reply with the answer only."),
    ("Expected answers are short: keep yours short.", "- The answers are short: keep yours short."),
    ("Give an expected answer without extra words.", "- Give the answer without extra words."),
    # Proposed on WebShop, whose expected answer is a product: what the request asks for.
    ("Before you answer, ensure that the search query includes the expected product "
     "attributes.", "- Before you answer, ensure that the search query includes the requested "
     "product attributes."),
    ("The expected cell is B2; an expected value holds units.",
     "- The requested cell is B2; a requested value holds units."),
])
def test_a_rule_speaks_of_the_answer_not_the_expected_answer(rule: str, content: str) -> None:
    # The agent never sees an expected answer: a rule is put in the words it knows.
    assert rule_edit(rule, 1).content == content


@pytest.mark.parametrize("optimizer", [{"skill_update_mode": "rewrite_from_suggestions"},
                                       {"use_skill_aware_reflection": True}])
def test_rules_need_the_patch_mode(toy_dir: Path, optimizer: dict[str, Any]) -> None:
    cfg = toy_config(toy_dir, gradient={"proposal_form": "rules"}, optimizer=optimizer)
    with pytest.raises(ConfigError, match="proposal_form: rules"):
        load_config(cfg)


@pytest.mark.parametrize(("written", "rules"), [
    # a quoted list written into one string, its closing brackets after it
    ("Reply with 'Step one:', 'Before you answer, check the units.']}",
     ["Reply with 'Step one:", "Before you answer, check the units."]),
    ("['Reply briefly.', \"Check the units.\"]", ["Reply briefly.", "Check the units."]),
    # quotes and brackets that belong to the rule
    ("Reply with 'yes' or 'no'.", ["Reply with 'yes' or 'no'."]),
    ('Say "done" when finished.', ['Say "done" when finished.']),
    ("Give the list as [a, b].", ["Give the list as [a, b]."]),
])
def test_a_quoted_list_in_one_rule_is_its_rules(written: str, rules: list[str]) -> None:
    assert split_rules(written) == rules
    edits = RulesReply(rules=[written]).to_edits(support=1)
    assert [e.content for e in edits] == [f"- {r}" for r in rules]


EMBEDDED_OPTIMIZER = "model.optimizer={backend: embedded}"


@pytest.mark.parametrize(("overrides", "expected"), [
    ([], (1, "edits")),  # a scripted optimizer: the plain defaults
    ([EMBEDDED_OPTIMIZER], (3, "rules")),  # a small local one: three sampled rules a step
    ([EMBEDDED_OPTIMIZER, "gradient.proposals=1"], (1, "rules")),  # what the config sets wins
    ([EMBEDDED_OPTIMIZER, "gradient.proposal_form=edits"], (3, "edits")),
    ([EMBEDDED_OPTIMIZER, "optimizer.skill_update_mode=rewrite_from_suggestions"], (3, "edits")),
    ([EMBEDDED_OPTIMIZER, "optimizer.use_skill_aware_reflection=true"], (3, "edits")),
])
def test_a_small_local_optimizer_samples_rules_unless_told_otherwise(
        toy_dir: Path, overrides: list[str], expected: tuple[int, str]) -> None:
    resolved = load_config(toy_config(toy_dir), overrides)
    g = resolved.config.gradient
    assert (g.proposals, g.proposal_form) == expected
    assert g.failure_only == (EMBEDDED_OPTIMIZER in overrides)
    written = resolved.resolved()["gradient"]  # what the run directory records, and resumes by
    assert (written["proposals"], written["proposal_form"]) == expected
    explicit = load_config(toy_config(toy_dir, gradient={"failure_only": False}), overrides)
    assert explicit.config.gradient.failure_only is False


def test_proposals_are_bounded(toy_dir: Path) -> None:
    with pytest.raises(ConfigError, match="gradient.proposals"):
        load_config(toy_config(toy_dir, gradient={"proposals": 9}))


@pytest.mark.parametrize(("reply", "expected", "relation"), [
    ("It is Paris.", ["Paris"], "contains an expected answer plus 2 more words"),
    ("Amen", ["The Amen Break"], "is part of an expected answer, 2 words short"),
    ("PARIS!", ["paris"], "matches an expected answer except for case or punctuation"),
    ("London", ["Paris"], "shares no word with any expected answer"),
    ("the big city", ["a big town"], "shares 1 word with an expected answer but differs: "
                                     "'the' where it expects 'a', 'city' where it expects "
                                     "'town'"),
    # A unit written out where its symbol was expected; a number with thousands separators is
    # the number without them, as the scorers read it.
    ("21,000 grams", ["21000 g"], "shares 1 word with an expected answer but differs: "
                                  "'grams' where it expects 'g'"),
    ("2,050", ["2050"], "matches an expected answer except for case or punctuation"),
    # A long answer beside a short reply: whole phrases missing are not listed.
    ("Rotterdam is a city in the Netherlands",
     ["Rotterdam (/ˈrɒtərdæm/ or /ˌrɒtərˈdæm/; Dutch: [ˌrɔtərˈdɑm] (listen)) is a city in "
      "South Holland, the Netherlands"],
     "shares 7 words with an expected answer but differs"),
    ("240 minutes", ["2400 min"], "shares no word with any expected answer: '240' where it "
                                  "expects '2400', 'minutes' where it expects 'min'"),
    ("in the north east", ["north"], "contains an expected answer plus 3 more words"),
    ("north of town", ["north side of town"], "shares 3 words with an expected answer but "
                                              "differs: 'side' missing"),
    # A word written another way: a leading zero, a spelling. Another number is no such word.
    ("3:40", ["03:40"], "matches an expected answer word for word but for characters: '3' "
                        "where it expects '03' ('0' missing at the start)"),
    ("the color red", ["The colour red"], "matches an expected answer word for word but for "
                                          "characters: 'color' where it expects 'colour' ('u' "
                                          "missing)"),
    ("apples red", ["apple red"], "matches an expected answer word for word but for "
                                  "characters: 'apples' where it expects 'apple' ('s' extra at "
                                  "the end)"),
    ("12:40", ["13:40"], "shares 1 word with an expected answer but differs: '12' where it "
                         "expects '13'"),
    # The reading example's reply "1999" to a question whose answer is "1998": another year.
    ("1999", ["Following a referendum in 1997", "1998"], "shares no word with any expected "
                                                          "answer"),
    ("the 10th", ["the 10"], "matches an expected answer word for word but for characters: "
                             "'10th' where it expects '10' ('th' extra at the end)"),
    ("", ["x"], "is empty"),
    ("42", [], ""),
])
def test_compare_reply_says_how_a_reply_relates_to_what_was_expected(
        reply: str, expected: list[str], relation: str) -> None:
    assert compare_reply(reply, expected)[1] == relation


@pytest.mark.parametrize(("reply", "expected", "pairs"), [
    ("1:41:38", ["01:40:58"], [("1", "01")]),  # another number too: still a width
    ("3:40", ["3 40", "03:40"], [("3", "03")]),  # the answer that pairs most
    ("Room 05", ["Room 5"], [("05", "5")]),
    ("12:40", ["13:40"], []),  # another number is no width
    ("3:40", ["03:40:00"], []),  # numbers that do not pair one to one
    ("the 10th", ["the 10"], []),
])
def test_a_number_written_with_another_count_of_digits_is_found(
        reply: str, expected: list[str], pairs: list[tuple[str, str]]) -> None:
    assert number_widths(reply, expected) == pairs


def test_widths_shared_by_several_replies_are_counted_over_the_batch() -> None:
    """Zero-padded answers ("03:40") read as one form when counted, where each task's own
    relation says "shares no word" or "'0' missing at the start" one task at a time."""
    def one(task_id: str, answer: str) -> RolloutResult:
        return RolloutResult(task_id=task_id, answer=answer, hard=0.0, soft=0.0,
                             messages=[Message(role="user", content=f"Question {task_id}"),
                                       Message(role="assistant", content=answer)])
    batch = [one("a", "1:41:38"), one("b", "3:27:06"), one("c", "2:23"), one("d", "7 apples")]
    tasks = {t: Task(id=t, prompt=f"Question {t}", reference=ref) for t, ref in
             (("a", "01:40:58"), ("b", "03:27:06"), ("c", "02:23"), ("d", "8 apples"))}
    head = render_contrast(batch, tasks, 1600).split("\n\n")[0].splitlines()
    assert head[-1] == ("- 3 of 4 replies write a number with fewer digits than the expected "
                        "answer: '1' for '01', '3' for '03' (the expected answers write these "
                        "numbers with 2 digits)")
    assert widths_line([[("1", "01")], [], [("05", "5")]], 3) == ""  # one reply is no form
    assert widths_line([[("05", "5")], [("007", "7")]], 2) == (
        "- 2 of 2 replies write a number with more digits than the expected answer: '05' for "
        "'5', '007' for '7' (the expected answers write these numbers with 1 digit)\n")


@pytest.mark.parametrize("fraction", [0.3, 0.55, 0.8])
def test_a_run_killed_while_screening_resumes_to_the_same_result(
        toy_dir: Path, tmp_path: Path, fraction: float) -> None:
    from test_resume import Counter, comparable, run

    cfg = _sampled(toy_dir)
    reference = Counter()
    run(cfg, tmp_path / "ref", reference)
    first = Counter(kill_at=1 + int(fraction * reference.completed))
    assert run(cfg, tmp_path / "run", first) is None
    second = Counter()
    assert run(cfg, tmp_path / "run", second) is not None
    assert comparable(tmp_path / "run") == comparable(tmp_path / "ref")
    assert first.completed + second.completed == reference.completed


def test_a_line_that_hurts_is_found_by_ablation_when_no_added_rule_can_undo_it(
        toy_dir: Path) -> None:
    cfg = _sampled(toy_dir, helpful=False, proposals=1)
    rules = "".join(f"\n{toy.rule(topic)}\n" for topic in ("year", "city", "animal"))
    (toy_dir / "toy_skill.md").write_text(toy.INITIAL_SKILL + rules + f"\n{toy.HARMFUL}\n")
    data = yaml.safe_load(cfg.read_text())
    data["gradient"]["line_ablations"] = 2
    cfg.write_text(yaml.safe_dump(data))
    _train(cfg, toy_dir / "run")
    step = toy_dir / "run" / "steps" / "e01-s001"
    rows = json.loads((step / "screen.json").read_text())["rows"]
    assert rows[1]["edits"] == [f"delete: {toy.HARMFUL}"]  # the latest line first
    assert rows[2]["edits"] == [f"delete: {toy.rule('animal')}"]
    assert json.loads((step / "screen.json").read_text())["chosen"] == 1
    assert json.loads((step / "gate.json").read_text())["decision"] == "accept_new_best"
    assert toy.HARMFUL not in (toy_dir / "run" / "best_skill.md").read_text()


def test_a_skill_that_hurts_as_a_whole_is_found_by_the_skill_ablation(toy_dir: Path) -> None:
    """The harmful line is written twice: deleting either one leaves the other, so every line
    ablation ties the current skill. No skill at all is the candidate that shows it, and the
    gate adopts it."""
    cfg = _sampled(toy_dir, helpful=False, proposals=1)
    (toy_dir / "toy_skill.md").write_text(
        toy.INITIAL_SKILL + f"\n{toy.HARMFUL}\n\n- Always: {toy.HARMFUL}\n")
    data = yaml.safe_load(cfg.read_text())
    data["gradient"].update(line_ablations=2, skill_ablation=True)
    data.setdefault("evaluation", {})["gate_metric"] = "soft"
    cfg.write_text(yaml.safe_dump(data))
    _train(cfg, toy_dir / "run")
    step = toy_dir / "run" / "steps" / "e01-s001"
    screening = json.loads((step / "screen.json").read_text())
    rows = screening["rows"]
    assert [r["edits"] for r in rows[1:3]] == [[f"delete: - Always: {toy.HARMFUL}"],
                                               [f"delete: {toy.HARMFUL}"]]
    assert rows[1]["score"] == rows[2]["score"] == screening["current"]  # each alone: a tie
    assert len(rows[3]["edits"]) == 5 and rows[3]["score"] > screening["current"]
    assert screening["chosen"] == 3
    assert json.loads((step / "gate.json").read_text())["decision"] == "accept_new_best"
    assert (toy_dir / "run" / "best_skill.md").read_text() == ""


def test_the_skill_ablation_is_not_made_twice_or_for_an_empty_skill() -> None:
    from skillgrad.stages.screen import ablations

    one = "# Shop\n\nBuy the item.\n"
    assert [p.candidate for p in ablations(one, 1, whole=True)] == ["# Shop\n", ""]
    assert [p.candidate for p in ablations(one, 0, whole=True)] == [""]
    assert ablations("# Shop\n", 3, whole=True) == []
    two = one + "\n- Reply with one action.\n"
    made = ablations(two, 1, whole=True)
    assert [p.candidate for p in made] == ["# Shop\n\nBuy the item.\n", ""]
    assert made[1].n_applied == made[1].n_proposed == 3
    assert made[1].items[0].rationale == "skill ablation"


def test_an_ablation_deletes_a_wrapped_instruction_whole() -> None:
    """WebShop's shipped skill wraps its steps onto two lines each: deleting one line would
    leave half a sentence, so an ablation takes out the whole item (or paragraph)."""
    from skillgrad.stages.screen import ablations, instructions

    skill = ("# Shop\n\nYou buy one item. Every reply is\none action.\n\n"
             "1. Search with the product type, in a few words\n   taken from the instruction.\n"
             "2. Open the first item.\n\n- Reply with one action.\n")
    assert instructions(skill) == [
        "You buy one item. Every reply is\none action.",
        "1. Search with the product type, in a few words\n   taken from the instruction.",
        "2. Open the first item.", "- Reply with one action."]
    made = [p.candidate for p in ablations(skill, 8)]
    assert len(made) == 4
    assert made[2] == ("# Shop\n\nYou buy one item. Every reply is\none action.\n\n"
                       "2. Open the first item.\n\n- Reply with one action.\n")
    assert all("taken from" not in c or "Search with" in c for c in made)


def test_no_ablation_by_default(toy_dir: Path) -> None:
    _train(_sampled(toy_dir, helpful=False, proposals=1), toy_dir / "run")
    assert not (toy_dir / "run" / "steps" / "e01-s001" / "screen.json").exists()


def test_a_skill_the_gate_rejected_is_not_judged_again(toy_dir: Path) -> None:
    """The greedy proposal (a greeting that changes nothing scored) comes back at step 2 as
    the same skill: the gate's verdict on it stands, and no selection task is run for it."""
    trainer = _train(_sampled(toy_dir, proposals=1, steps=2), toy_dir / "run")
    assert trainer.state is not None
    first, second = trainer.state.history
    assert first.decision == "reject" and first.candidate_hash
    assert second.decision == "skip"
    gate = json.loads((toy_dir / "run" / "steps" / "e01-s002" / "gate.json").read_text())
    assert gate["reason"] == ("the gate rejected this same skill at step 1; it is not judged "
                              "again")
    assert [c for c in _calls(toy_dir / "run" / "steps" / "e01-s002")
            if c["stage"] == "eval_val"] == []


def test_the_screen_passes_over_a_skill_the_gate_rejected_before() -> None:
    from skillgrad.skill import skill_hash
    from skillgrad.stages.candidate import Proposal
    from skillgrad.stages.screen import screen

    skill = "# Skill\n"
    old, new = skill + "- Old rule.\n", skill + "- New rule.\n"
    tasks = [Task(id="t1", prompt="q", reference=["a"])]
    baseline = [RolloutResult(task_id="t1", messages=(), answer="b", hard=0.0, soft=0.0)]
    rolled: list[str] = []

    def run(doc: str, ts: Any) -> list[RolloutResult]:
        rolled.append(doc)
        return [RolloutResult(task_id="t1", messages=(), answer="a", hard=1.0, soft=1.0)]

    done = screen([Proposal(candidate=old), Proposal(candidate=new)], skill, baseline, tasks,
                  run, lambda rs: sum(r.hard for r in rs), {skill_hash(old): 3})
    assert done.chosen == 1 and rolled == [new]
    assert done.rows[0]["status"] == "rejected before"
    assert done.rows[0]["reason"] == "the gate rejected this same skill at step 3"
    alone = screen([Proposal(candidate=old)], skill, baseline, tasks, run,
                   lambda rs: sum(r.hard for r in rs), {skill_hash(old): 3})
    assert alone.chosen is None and "1 the gate rejected before" in alone.reason


def test_a_step_whose_analyses_make_no_new_skill_samples_once_more(toy_dir: Path) -> None:
    """Both analyses write no rule: rather than a wasted step, two more are sampled, hotter,
    and the second of them finds the rule, which the gate adopts."""
    cfg = toy_config(
        toy_dir,
        model={"target": {"backend": "scripted", "function": "toy:target"},
               "optimizer": {"backend": "scripted", "function": "toy:make_late_optimizer",
                             "function_args": {}}},
        train={"num_epochs": 1, "steps_per_epoch": 1},
        gradient={"minibatch_size": 100, "failure_only": True, "proposals": 2,
                  "proposal_form": "rules"})
    _train(cfg, toy_dir / "run")
    step = toy_dir / "run" / "steps" / "e01-s001"
    screening = json.loads((step / "screen.json").read_text())
    assert [r["status"] for r in screening["rows"]] == ["unchanged"] * 3 + ["scored"]
    assert screening["chosen"] == 3 and screening["sampled_again"] == 2
    assert screening["reason"].endswith(
        "(proposals 2-3 sampled again: none of the first 2 was a new skill)")
    temps = [c["request"]["temperature"] for c in _calls(step)
             if c["request"]["kind"] == "analyst_rules"]
    assert temps == [0.0, 0.7, 0.9, 1.1]
    assert json.loads((step / "gate.json").read_text())["decision"] == "accept_new_best"


@pytest.mark.parametrize(("proposals", "temperature", "again"), [
    (3, 0.0, [3, 4, 5]), (2, 0.0, [2, 3]), (5, 0.0, [5]), (6, 0.0, []), (2, 1.0, [2])])
def test_proposals_sampled_again_stay_at_a_temperature_a_small_model_can_answer(
        toy_dir: Path, proposals: int, temperature: float, again: list[int]) -> None:
    from skillgrad import settings

    cfg = load_config(toy_config(toy_dir, optimizer={"temperature": temperature},
                                 gradient={"proposals": proposals})).config
    assert settings.resamples(cfg) == again
    assert all(settings.sample_temperature(cfg, k) <= 1.5 for k in again)


def test_a_new_skill_is_one_the_screen_would_roll_out() -> None:
    from skillgrad.skill import skill_hash
    from skillgrad.stages.candidate import Proposal
    from skillgrad.stages.screen import new_skill

    skill = "# Skill\n"
    old, new = skill + "- Old rule.\n", skill + "- New rule.\n"
    rejected = {skill_hash(old): 2}
    assert new_skill(Proposal(candidate=new), skill, rejected)
    assert not new_skill(Proposal(candidate=old), skill, rejected)
    assert not new_skill(Proposal(candidate=skill), skill, rejected)
    assert not new_skill(Proposal(candidate=new, refusal="over the size cap"), skill, rejected)


def test_candidates_that_tie_on_the_batch_get_a_second_look_on_more_tasks() -> None:
    from skillgrad.stages.candidate import Proposal
    from skillgrad.stages.screen import screen

    skill = "# Skill\n"
    same, helps, hurts = (skill + "- Be polite.\n", skill + "- Give the year alone.\n",
                          skill + "- Say nothing.\n")
    batch = [Task(id=f"b{i}", prompt="q", reference=["a"]) for i in range(2)]
    extra = [Task(id=f"x{i}", prompt="q", reference=["a"]) for i in range(2)]
    baseline = [RolloutResult(task_id=t.id, messages=(), answer="a", hard=1.0, soft=1.0)
                for t in batch]
    rolled: list[tuple[str, list[str]]] = []

    def run(doc: str, ts: Any) -> list[RolloutResult]:
        rolled.append((doc, [t.id for t in ts]))
        right = doc == helps or all(t.id.startswith("b") for t in ts)  # all tie on the batch
        if doc == hurts and all(t.id.startswith("b") for t in ts):
            right = False
        return [RolloutResult(task_id=t.id, messages=(), answer="a", hard=float(right),
                              soft=float(right)) for t in ts]

    def value(rs: Any) -> float:
        return sum(r.hard for r in rs) / len(rs)

    proposals = [Proposal(candidate=hurts), Proposal(candidate=same), Proposal(candidate=helps)]
    done = screen(proposals, skill, baseline, batch, run, value, extra=extra, tie_break=2)
    assert done.chosen == 2
    assert "tied the current skill on the step's 2 training tasks and scores 1.000" in done.reason
    assert done.rows[1]["second_look"] == {"tasks": 2, "score": 0.5, "current": 0.5}
    assert done.rows[2]["second_look"] == {"tasks": 2, "score": 1.0, "current": 0.5}
    assert "second_look" not in done.rows[0]  # it lost on the batch: no second look
    assert (skill, ["x0", "x1"]) in rolled  # the current skill, once, on the extra tasks
    rolled.clear()
    off = screen(proposals, skill, baseline, batch, run, value, extra=extra, tie_break=0)
    assert off.chosen is None and all(ids == ["b0", "b1"] for _, ids in rolled)
    only_same = screen(proposals[:2], skill, baseline, batch, run, value, extra=extra,
                       tie_break=2)
    assert only_same.chosen is None and "1 that tied it did not on 4" in only_same.reason


def test_a_shorter_skill_that_ties_goes_to_the_gate_when_asked() -> None:
    """On the batch every candidate ties. With ``shorter_on_tie`` the shortest one that only
    deletes goes to the gate, unless it fell behind on the second look; an added rule that
    ties never does."""
    from skillgrad.stages.candidate import Proposal
    from skillgrad.stages.screen import ablations, screen

    skill = "# Skill\n\nWork it out step by step.\n\n- Give the number alone.\n"
    rule = Proposal(candidate=skill + "\n- Be polite.\n")
    line, whole = ablations(skill, 1, whole=True)
    batch = [Task(id="b0", prompt="q", reference=["a"])]
    extra = [Task(id="x0", prompt="q", reference=["a"])]
    baseline = [RolloutResult(task_id="b0", messages=(), answer="a", hard=1.0, soft=1.0)]
    behind: set[str] = set()

    def run(doc: str, ts: Any) -> list[RolloutResult]:
        right = float(not (doc in behind and ts[0].id == "x0"))
        return [RolloutResult(task_id=t.id, messages=(), answer="a", hard=right, soft=right)
                for t in ts]

    def value(rs: Any) -> float:
        return sum(r.hard for r in rs) / len(rs)

    proposals = [rule, line, whole]
    assert screen(proposals, skill, baseline, batch, run, value).chosen is None
    done = screen(proposals, skill, baseline, batch, run, value, shorter_on_tie=True)
    assert done.chosen == 2 and whole.candidate == ""
    assert done.reason.endswith("proposal 2 of 3 tied it and is shorter (no skill at all): "
                                "the gate decides")
    looked = screen(proposals, skill, baseline, batch, run, value, extra=extra, tie_break=3,
                    shorter_on_tie=True)
    assert looked.chosen == 2 and looked.rows[2]["second_look"]["score"] == 1.0
    behind.add(whole.candidate)  # the skill ablation falls behind on the second look
    looked = screen(proposals, skill, baseline, batch, run, value, extra=extra, tie_break=3,
                    shorter_on_tie=True)
    assert looked.chosen == 1 and "(1 instruction deleted)" in looked.reason
    assert screen([rule], skill, baseline, batch, run, value, shorter_on_tie=True).chosen is None


def _appending(skill: str, *lines: str) -> Any:
    """A proposal that appends ``lines`` to ``skill``, each applied."""
    from skillgrad.records import Edit, Selection
    from skillgrad.stages.candidate import Proposal
    from skillgrad.stages.update import apply_edits

    edits = tuple(Edit(op="append", content=line) for line in lines)
    candidate, report = apply_edits(skill, list(edits))
    return Proposal(candidate=candidate, items=edits, report=report, n_proposed=len(edits),
                    n_applied=len(edits), selection=Selection(budget=3, ranked=edits,
                                                              kept=edits))


def _first_right(tasks: Any, right: int) -> list[RolloutResult]:
    """Rollouts of ``tasks`` of which the first ``right`` are solved."""
    return [RolloutResult(task_id=t.id, messages=(), answer="a", hard=float(i < right),
                          soft=0.0) for i, t in enumerate(tasks)]


def _hard_mean(rs: Any) -> float:
    return sum(r.hard for r in rs) / len(rs)


def test_a_rule_that_rides_along_is_left_out_before_the_gate() -> None:
    """An analyst's reply holds one rule that earns the score and one that does nothing (seen
    with the 1.5B optimizer on the quickstart: "Remove any extra words from the reply." beside
    "Ensure the reply follows the correct structure of a sentence."). The rule that works
    stays; the rider is reported, skipped, with the stage that left it out."""
    from skillgrad.records import Edit
    from skillgrad.stages.screen import ablations, without_riders
    from skillgrad.stages.update import apply_edits

    skill = "# Skill\n\nAnswer the question.\n"
    works, rider, other = ("- Remove any extra words from the reply.",
                           "- Ensure the reply follows the structure of a sentence.",
                           "- Give numbers in digits.")
    tasks = [Task(id=f"t{i}", prompt="q", reference=["a"]) for i in range(4)]
    rolled: list[str] = []

    def run(doc: str, ts: Any) -> list[RolloutResult]:
        rolled.append(doc)
        return _first_right(ts, 2 * (works in doc) + (other in doc))  # of the four tasks

    def proposal(*lines: str) -> Any:
        return _appending(skill, *lines)

    full = proposal(works, rider, other)
    lean, left = without_riders(full, skill, 0.75, tasks, run, _hard_mean)
    assert lean.candidate == apply_edits(skill, [Edit(op="append", content=works),
                                                 Edit(op="append", content=other)])[0]
    assert len(left) == 1 and left[0].startswith(repr(rider))
    assert "the other 2 scored 0.750 without it on the step's 4 training tasks, 0.750 with it" \
        in left[0]
    outcomes = lean.report.outcomes if lean.report else ()
    assert [o.status for o in outcomes] == ["applied", "skipped", "applied"]
    assert outcomes[1].reason is not None and outcomes[1].reason.startswith(
        "left out at the screen: ")
    assert (lean.n_applied, lean.n_skipped) == (2, 1)
    assert len(rolled) == 3 + 2  # each of three left out, then each of the two left
    # Rules that each earn part of the score all stay; so does a lone rule.
    both = proposal(works, other)
    assert without_riders(both, skill, 0.75, tasks, run, _hard_mean) == (both, [])
    alone = proposal(works)
    assert without_riders(alone, skill, 0.5, tasks, run, _hard_mean) == (alone, [])
    # Deletions are not taken apart: leaving one out would bring its line back.
    longer = skill + "\n- Be brief.\n\n- Be kind.\n"
    (whole,) = [p for p in ablations(longer, 0, whole=True)]
    assert without_riders(whole, longer, 0.0, tasks, run, _hard_mean) == (whole, [])


def test_a_sentence_that_rides_along_is_cut_from_its_rule() -> None:
    """One rule of two sentences, one of which does nothing (a dates run's gate adopted "If
    the context is not given, you should rely on what you know about the topic, not on the
    specific date. Reply with the date in the format the task asks for (...)."): the sentence
    that earns the score stays, the other is reported skipped beside it, with the stage. A
    sentence that leans on the one before (an example, "... those words.") is never left as a
    rule of its own; it goes with that one."""
    from skillgrad.records import Edit
    from skillgrad.stages.screen import sentence_cuts, without_riders
    from skillgrad.stages.update import apply_edits

    skill = "# Skill\n\nAnswer the question.\n"
    works = "Reply with the date in the format the task asks for."
    rider = "If the context is not given, rely on what you know about the topic."
    tasks = [Task(id=f"t{i}", prompt="q", reference=["a"]) for i in range(4)]
    rolled: list[str] = []

    def run(doc: str, ts: Any) -> list[RolloutResult]:
        rolled.append(doc)
        return _first_right(ts, 2 * (works in doc))

    def proposal(*lines: str) -> Any:
        return _appending(skill, *lines)

    both = proposal(f"- {rider} {works}")
    lean, left = without_riders(both, skill, 0.5, tasks, run, _hard_mean)
    assert lean.candidate == apply_edits(skill, [Edit(op="append", content=f"- {works}")])[0]
    assert len(rolled) == 2 + 0  # each sentence left out once; one sentence is no rule to cut
    assert left == [f"{rider!r} (the rest scored 0.500 without it on the step's 4 training "
                    "tasks, 0.500 with it)"]
    outcomes = lean.report.outcomes if lean.report else ()
    assert [(o.edit.content, o.status) for o in outcomes] == [
        (f"- {works}", "applied"), (rider, "skipped")]
    assert (lean.n_applied, lean.n_skipped) == (1, 1)
    assert [e.content for e in lean.kept] == [f"- {works}"]
    assert any(x.startswith("screen left out 1: the rest scored") for x in lean.losses())
    # Each sentence earning part of the score keeps the rule whole.
    def each(doc: str, ts: Any) -> list[RolloutResult]:
        return _first_right(ts, (works in doc) + (rider in doc))

    whole = proposal(f"- {works} {rider}")
    assert without_riders(whole, skill, 0.5, tasks, each, _hard_mean) == (whole, [])
    # A sentence that leans on the one before goes with it, never alone; a rule over several
    # lines is not cut.
    assert sentence_cuts(f"- {works} For example, 4 March 2021 as 04/03/2021.") == []
    assert sentence_cuts("- If the reply has extra words, leave them out. Reply with only "
                         "those words.") == []
    assert sentence_cuts(f"- {works}\n  {rider}") == []
    assert sentence_cuts(f"- {works} `Answer: 04/03/2021`, not `Answer: 4/3/2021`.") == []
    assert sentence_cuts(f"- {works} (Never guess the year.)") == []
    assert sentence_cuts("- Give dates as the question does (e.g. 04/03/2021). Do not guess.") \
        == [("- Do not guess.", "Give dates as the question does (e.g. 04/03/2021)."),
            ("- Give dates as the question does (e.g. 04/03/2021).", "Do not guess.")]
    assert sentence_cuts(f"- {rider} Instead, reply in the format the task asks for.") == [
        ("- Reply in the format the task asks for.", rider),
        (f"- {rider}", "Instead, reply in the format the task asks for.")]
    assert sentence_cuts(f"- {works} Instead, this keeps every field of the date.") == []
    assert sentence_cuts(f"{rider} {works} For example, 04/03/2021.") == [
        (f"{works} For example, 04/03/2021.", rider), (rider, f"{works} For example, 04/03/2021.")]


def _riders(skill: str, tasks: str, prompt: str) -> dict[str, Any]:
    """Proposes the rule that works beside one that changes nothing the toy agent does."""
    if toy.rule("year") in skill or "year" not in tasks:
        return {"reasoning": "done", "edits": []}
    return {"reasoning": "years", "edits": [
        {"op": "append", "content": toy.rule("year"), "support": 2},
        {"op": "append", "content": "Keep a calm tone.", "support": 1}]}


riders_optimizer = scripted_optimizer(_riders)


def test_the_trainer_drops_a_rider_and_show_names_the_screen(toy_dir: Path) -> None:
    from e2e import cli

    steps = {"train": {"num_epochs": 1, "steps_per_epoch": 1},
             "optimizer": {"learning_rate": 2, "min_learning_rate": 2}}
    cfg = toy_config(toy_dir, "test_proposals:riders_optimizer",
                     gradient={"proposals": 2, "drop_riders": True}, **steps)
    out = toy_dir / "run"
    build_trainer(load_config(cfg), out).fit()
    best = (out / "best_skill.md").read_text()
    assert toy.rule("year") in best and "calm tone" not in best
    step = out / "steps" / "e01-s001"
    report = json.loads((step / "apply_report.json").read_text())["outcomes"]
    assert [(o["edit"]["content"], o["status"]) for o in report] == [
        (toy.rule("year"), "applied"), ("Keep a calm tone.", "skipped")]
    shown = cli("show", str(out)).stdout
    assert "left out 'Keep a calm tone.'" in " ".join(shown.split())
    # The stage that lost it is the screen, not the update.
    flat = " ".join(shown.split())
    assert "on the way to the candidate: screen left out 1: the other 1 scored" in flat
    assert "update skipped" not in flat
    # What the target answered without the rider is kept with the screen's other replies.
    roles = {json.loads(line)["role"]
             for line in (step / "screened.jsonl").read_text().splitlines()}
    assert any(role.endswith(", a part left out") for role in roles), roles
    # Off (the default), the rider goes to the gate with the rule.
    cfg2 = toy_config(toy_dir, "test_proposals:riders_optimizer", gradient={"proposals": 2},
                      **steps)
    build_trainer(load_config(cfg2), toy_dir / "off").fit()
    assert "calm tone" in (toy_dir / "off" / "best_skill.md").read_text()


def test_the_second_look_draws_other_training_tasks(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir, train={"num_epochs": 1, "steps_per_epoch": 1, "batch_size": 4},
                     gradient={"proposals": 2, "tie_break": 2, "failure_only": True})
    trainer = build_trainer(load_config(cfg), toy_dir / "run")
    trainer.state = trainer._start_or_resume()
    batch, _ = trainer._batch(0)
    extra = trainer._extra_tasks(batch)
    assert len(extra) == len(batch) == 4
    assert not {t.id for t in extra} & {t.id for t in batch}
    assert [t.id for t in trainer._extra_tasks(batch)] == [t.id for t in extra]  # seeded


def test_what_the_target_answered_for_each_screened_candidate_is_kept_and_shown(
        toy_dir: Path) -> None:
    from e2e import cli

    from skillgrad.runview.rollouts import read_rollouts

    out = toy_dir / "run"
    _train(_sampled(toy_dir), out)
    step = out / "steps" / "e01-s001"
    screening = json.loads((step / "screen.json").read_text())
    kept = [json.loads(line) for line in (step / "screened.jsonl").read_text().splitlines()]
    batch = [json.loads(line) for line in (step / "rollouts.jsonl").read_text().splitlines()]
    # Each screened candidate's rollouts, with its hash and its number in screen.json, and
    # the scores screen.json holds for it.
    assert [r["role"] for r in kept] == [f"proposal {i}" for i in range(3) for _ in batch]
    for row in screening["rows"]:
        mine = [r for r in kept if r["role"] == f"proposal {row['proposal']}"]
        assert {r["skill"] for r in mine} == {row["candidate_hash"]}
        assert {r["task_id"]: [r["hard"], r["soft"]] for r in mine} == row["per_task"]
        assert all(r["messages"][-1]["role"] == "assistant" for r in mine)
    # Listed with the step, and on their own as "e01-s001 screen".
    view = read_rollouts(out, step="e01-s001 screen")
    assert len(view.rows) == len(kept) and {r.source for r in view.rows} == {"e01-s001 screen"}
    assert view.filters["step"] == "e01-s001 screen"
    assert "e01-s001 screen" in read_rollouts(out).sources
    assert len(read_rollouts(out, step="e01-s001").rows) > len(kept) + len(batch) - 1
    # The harmful line breaks every answer; the candidate the gate judged opens as a version,
    # the others (never gated) do not.
    harmful = [r for r in view.rows if r.role == "proposal 1"]
    assert harmful and all(r.failed for r in harmful)
    gated = {r.role: r.versioned for r in view.rows}
    assert gated == {"proposal 0": False, "proposal 1": False, "proposal 2": True}
    shown = cli("show", str(out), "--rollouts", "e01-s001 screen").stdout
    assert "e01-s001 screen · task" in shown and "(proposal 1)" in shown
    bad = cli("show", str(out), "--rollouts", "e01-s001 sreen")
    assert bad.returncode != 0
    assert "a step's are its name (e01-s001) and e01-s001 screen, e01-s001 second look" in \
        " ".join(bad.stderr.split())


def test_the_screens_runs_say_whose_skill_and_which_tasks() -> None:
    from skillgrad.skill import skill_hash
    from skillgrad.stages.screen import screened_roles

    skill, one, two = "# S\n", "# S\n- One.\n", "# S\n- One.\n- Two.\n"
    batch = [Task(id="b0", prompt="q"), Task(id="b1", prompt="q")]
    extra = [Task(id="x0", prompt="q")]
    ran = [(two, batch, []), (one, batch, []), (skill, extra, []), (one, extra, []),
           ("# S\n- Two.\n", batch, [])]
    roles = screened_roles(ran, skill, [two, one, two], batch, chosen=1)
    assert [(d, r) for d, r, _ in roles] == [
        (skill_hash(two), "proposal 0"), (skill_hash(one), "proposal 1"),
        (skill_hash(skill), "current skill, on more tasks"),
        (skill_hash(one), "proposal 1, on more tasks"),
        (skill_hash("# S\n- Two.\n"), "proposal 1, a part left out")]
