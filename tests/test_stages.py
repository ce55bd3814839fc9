"""Reflect, aggregate and select as pure functions of their inputs and a scripted model."""

from __future__ import annotations

import random

from skillgrad.models.messages import ChatRequest, Message
from skillgrad.models.scripted import ScriptedModel
from skillgrad.records import Edit, Patch, RejectedStep, RolloutResult
from skillgrad.stages.aggregate import MergeSettings, aggregate
from skillgrad.stages.reflect import ReflectSettings, minibatches, reflect
from skillgrad.stages.render import clip_middle
from skillgrad.stages.select import SelectSettings, select

SKILL = "# Skill\n\nBe brief.\n"


def result(i: int, ok: bool, text: str = "answer") -> RolloutResult:
    return RolloutResult(
        task_id=f"t{i}",
        messages=(Message(role="system", content=SKILL), Message(role="user", content=f"Q{i}?"),
                  Message(role="assistant", content=text)),
        answer=text, hard=1.0 if ok else 0.0, soft=1.0 if ok else 0.2,
        reason="" if ok else "wrong",
    )


def prompt(req: ChatRequest) -> str:
    return req.messages[-1].text()


def patch_reply(content: str) -> dict:
    """An analyst's reply with one edit that changes the skill (an idle one is asked again)."""
    return {"reasoning": "r",
            "edits": [{"op": "append", "content": f"Rule {content}.", "support": 2}]}


def test_minibatches_are_a_seeded_shuffle() -> None:
    results = [result(i, i % 2 == 0) for i in range(10)]
    a = minibatches(results, 4, random.Random(1))
    b = minibatches(results, 4, random.Random(1))
    assert [[r.task_id for r in m] for m in a] == [[r.task_id for r in m] for m in b]
    assert [len(m) for m in a] == [4, 4, 2]
    assert sorted(r.task_id for m in a for r in m) == sorted(r.task_id for r in results)


def test_reflect_runs_failure_and_success_analysts_per_minibatch() -> None:
    model = ScriptedModel(fn=lambda req: patch_reply("F" if "FAILED" in prompt(req) else "S"))
    results = [result(i, i < 3) for i in range(8)]
    patches = reflect(results, SKILL, model, ReflectSettings(minibatch_size=4, workers=2),
                      random.Random(0))
    assert {p.source for p in patches} == {"failure", "success"}
    for req in model.calls:
        text = prompt(req)
        shown = [line for line in text.splitlines() if line.startswith("Result: ")]
        want = "FAILED" if "Below are tasks the agent FAILED" in text else "solved"
        assert shown and all(line.startswith(f"Result: {want}") for line in shown)
        assert "Be brief." in text  # the skill is shown once, above the trajectories


def test_failure_only_skips_success_analysts() -> None:
    model = ScriptedModel(fn=lambda req: patch_reply("F"))
    results = [result(i, i < 3) for i in range(8)]
    patches = reflect(results, SKILL, model,
                      ReflectSettings(minibatch_size=8, failure_only=True), random.Random(0))
    assert [p.source for p in patches] == ["failure"]
    assert len(model.calls) == 1


def test_rejected_edits_reach_the_analyst_prompt() -> None:
    model = ScriptedModel(fn=lambda req: patch_reply("F"))
    rejected = [RejectedStep(global_step=1, edits=(Edit(op="append", content="Say no."),),
                             delta=-0.25)]
    reflect([result(0, False)], SKILL, model, ReflectSettings(), random.Random(0), rejected)
    text = prompt(model.calls[0])
    assert "Say no." in text and "-0.250" in text


def test_long_trajectories_keep_head_and_tail() -> None:
    text = "HEAD" + "x" * 10_000 + "TAIL"
    clipped = clip_middle(text, 1000)
    assert clipped.startswith("HEAD") and clipped.endswith("TAIL")
    assert "characters cut" in clipped and len(clipped) < 1100
    model = ScriptedModel(fn=lambda req: patch_reply("F"))
    reflect([result(0, False, text)], SKILL, model, ReflectSettings(max_trajectory_chars=500),
            random.Random(0))
    assert "characters cut" in prompt(model.calls[0])


def test_unparseable_analyst_reply_is_kept_raw() -> None:
    model = ScriptedModel(default="no json here")
    patches = reflect([result(0, False)], SKILL, model, ReflectSettings(), random.Random(0))
    assert patches[0].error and patches[0].raw == "no json here" and not patches[0].edits


def test_hierarchical_merge_groups_levels_and_final_merge() -> None:
    merged_contents = iter(f"M{i}" for i in range(100))
    model = ScriptedModel(fn=lambda req: patch_reply(next(merged_contents)))
    failures = [Patch(source="failure", edits=(Edit(op="append", content=f"f{i}"),))
                for i in range(5)]
    successes = [Patch(source="success", edits=(Edit(op="append", content="s"),))]
    agg = aggregate(failures + successes, SKILL, model, MergeSettings(merge_batch_size=2,
                                                                      workers=2))
    # failures: 5 -> 3 (2 calls) -> 2 (1 call) -> 1 (1 call); success: 1 (no call); final: 1
    assert len(model.calls) == 5
    assert [len(level) for level in agg.levels] == [3, 2, 1, 1]
    final = prompt(model.calls[-1])
    assert final.index("Fixes from failed tasks") < final.index("Reinforcements from solved")
    assert agg.merged.source == "merged" and agg.merged.edits


def test_a_single_patch_needs_no_merge_call() -> None:
    model = ScriptedModel()
    agg = aggregate([Patch(source="failure", edits=(Edit(op="append", content="x"),))], SKILL,
                    model, MergeSettings())
    assert not model.calls and agg.merged.edits[0].content == "x"


def test_an_unusable_merge_keeps_the_inputs_and_says_so() -> None:
    model = ScriptedModel(default="garbage")
    same = Edit(op="append", content="dup", support=2)
    patches = [Patch(source="failure", edits=(same,)), Patch(source="failure", edits=(same,))]
    agg = aggregate(patches, SKILL, model, MergeSettings())
    assert agg.merged.error and "unmerged" in agg.merged.error
    assert agg.merged.edits == (same.model_copy(update={"support": 4}),)


def test_select_without_ranking_when_the_budget_fits() -> None:
    model = ScriptedModel()
    merged = Patch(source="merged", edits=(Edit(op="append", content="a", support=1),
                                           Edit(op="append", content="b", support=3)))
    sel = select(merged.edits, 2, SKILL, model, SelectSettings())
    assert not model.calls and [e.content for e in sel.kept] == ["b", "a"]


def test_select_ranks_and_cuts_to_the_budget() -> None:
    model = ScriptedModel([{"reasoning": "c first", "order": [3, 99, 3, 1]}])
    edits = tuple(Edit(op="append", content=c, support=s) for c, s in (("a", 1), ("b", 5), ("c", 2)))
    sel = select(edits, 2, SKILL, model, SelectSettings())
    assert [e.content for e in sel.ranked] == ["c", "a", "b"]  # invalid and repeated ignored
    assert [e.content for e in sel.kept] == ["c", "a"]
    assert sel.budget == 2 and sel.error is None


def test_select_falls_back_to_support_order_and_records_why() -> None:
    model = ScriptedModel(default="not json")
    edits = tuple(Edit(op="append", content=c, support=s) for c, s in (("a", 1), ("b", 5), ("c", 2)))
    sel = select(edits, 1, SKILL, model, SelectSettings())
    assert [e.content for e in sel.kept] == ["b"]
    assert sel.error and "support" in sel.error and sel.raw == "not json"
