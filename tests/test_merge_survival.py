"""No proposal is lost on its way from the analysts to the candidate: several minibatches'
proposals, in each form, go through aggregate, select and update with a merge that answers as
a small model does (it drops one, invents an op with an empty anchor, moves an anchor off the
skill, or answers in the wrong shape), and every one is in the candidate, with what was put
back recorded. Contradicting rules from two minibatches reach the merge with the requests each
came from, and the condition it writes is the rule that is kept."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from e2e import cli

from skillgrad.models.messages import ChatRequest
from skillgrad.models.scripted import ScriptedModel
from skillgrad.records import Edit, EvalScore, Patch, Suggestion
from skillgrad.stages.aggregate import MergeSettings
from skillgrad.stages.candidate import (
    CandidateSettings,
    aggregate_stage,
    select_stage,
    update_stage,
)
from skillgrad.stages.replies import rule_edit
from skillgrad.stages.select import SelectSettings

SKILL = "# Times\n\nRead the question.\n\nWork out the time difference.\n"
REQUESTS = {"t1": "How long from 09:15:10 to 10:20:05? Give HH:MM:SS.",
            "t2": "How long from 08:00 to 09:30? Give HH:MM.",
            "t3": "How long from 07:05 to 07:50? Give HH:MM."}


def _rules(*texts: str) -> tuple[Edit, ...]:
    return tuple(rule_edit(t, 1) for t in texts)


RULE_PATCHES = [
    Patch(source="failure", edits=_rules("Reply with the time difference in HH:MM:SS format."),
          tasks=("t1",), reasoning="seconds were left out"),
    Patch(source="failure", edits=_rules("Reply with the time difference in HH:MM format.",
                                         "Write each field with two digits."),
          tasks=("t2", "t3"), reasoning="seconds were added"),
    Patch(source="failure", edits=_rules("Do not add words after the time."), tasks=("t3",)),
]


def _settings(form: str, mode: str = "patch") -> CandidateSettings:
    return CandidateSettings(mode=mode, merge=MergeSettings(form=form, merge_batch_size=8),
                             select=SelectSettings(mode="none"))


def _through(patches: list[Patch], merge: Any, settings: CandidateSettings,
             skill: str = SKILL) -> Any:
    model = ScriptedModel(fn=merge)
    proposal = aggregate_stage(skill, patches, model, settings, requests=REQUESTS)
    proposal = select_stage(proposal, 8, skill, model, settings,
                            lambda doc: EvalScore(split="val", skill_hash="x", hard=0, soft=0,
                                                  n=0, per_task={}),
                            lambda score, doc: 0.0)
    return update_stage(proposal, skill, patches, lambda stage: model, settings), model


def _merged(proposal: Any) -> Patch:
    return dict(proposal.artifacts)["merged_patch"]["merged"]


def test_rules_are_merged_as_rules_and_a_rule_the_merge_drops_is_kept() -> None:
    def small_model(request: ChatRequest) -> str:  # keeps one rule of the four, reworded
        assert request.kind == "merge_rules"
        return json.dumps({"difference": "kept the main one",
                           "rules": ["Reply with the time difference in HH:MM:SS format."]})

    done, model = _through(RULE_PATCHES, small_model, _settings("rules"))
    prompt = model.calls[0].messages[0].text()
    for rule in ("HH:MM:SS format.", "HH:MM format.", "two digits", "after the time"):
        assert rule in prompt
    assert "request: 'How long from 08:00 to 09:30? Give HH:MM.'" in prompt  # where it came from
    for rule in ("two digits", "after the time"):
        assert rule in done.candidate, rule  # left out by the merge, put back, applied
    merged = _merged(done)
    assert len(merged.repaired) == 2 and all("left out by the merge, kept" in r
                                            for r in merged.repaired)
    assert all(e.op == "append" for e in merged.edits)
    assert done.report.count("applied") == len(merged.edits) == 3


def test_contradicting_rules_become_the_condition_the_merge_writes() -> None:
    condition = ("Give the time difference in the format the question asks for: HH:MM:SS when "
                 "it asks for seconds, HH:MM otherwise.")

    def merge(request: ChatRequest) -> str:
        return json.dumps({"difference": "the two formats follow the question",
                           "rules": [condition, "Write each field with two digits.",
                                     "Do not add words after the time."]})

    done, _ = _through(RULE_PATCHES, merge, _settings("rules"))
    assert f"- {condition}" in done.candidate
    assert "in HH:MM:SS format." not in done.candidate and "in HH:MM format." not in done.candidate
    merged = _merged(done)
    assert merged.repaired == ()  # both sides are covered by the condition
    assert merged.edits[0].support == 2  # the support of both sides


def test_a_rule_the_merge_wrote_against_the_skill_is_left_out_and_said() -> None:
    """The analysts' rules are checked against the skill before the merge; a rule the merge
    writes in their place, which says again what the skill says or says its opposite, is
    checked after it: left out, listed with the merged patch, and counted in the step line."""
    condition = ("Give the time difference in the format the question asks for: HH:MM:SS when "
                 "it asks for seconds, HH:MM otherwise.")

    def merge(request: ChatRequest) -> str:
        return json.dumps({"difference": "the two formats follow the question", "rules": [
            condition, "Write each field with two digits.", "Do not add words after the time.",
            "Never work out the time difference.", "Work out the time difference."]})

    done, _ = _through(RULE_PATCHES, merge, _settings("rules"))
    assert f"- {condition}" in done.candidate and "Never work out" not in done.candidate
    assert done.candidate.count("Work out the time difference.") == 1
    assert dict(done.artifacts)["merged_patch"]["left_out"] == [
        "'- Never work out the time difference.' contradicts the skill's 'Work out the time "
        "difference.'; left out",
        "'- Work out the time difference.' restates the skill's 'Work out the time "
        "difference.'; left out"]
    assert "merge: 2 restating or contradicting the skill left out" in done.losses()
    assert done.report.count("applied") == 3 and done.report.count("skipped") == 0


def test_a_rule_the_merge_wrote_with_the_skill_around_its_own_clause_is_cut_to_it() -> None:
    """A merge that writes a rule as the skill's lines again with a clause of its own among
    them has it cut to that clause, as an analyst's rule is, and the step line counts it."""
    def merge(request: ChatRequest) -> str:
        return json.dumps({"difference": "the formats", "rules": [
            "Read the question; work out the time difference; write each field of the time "
            "with two digits; do not add words after the time."]})

    done, _ = _through(RULE_PATCHES, merge, _settings("rules"))
    assert "- Write each field of the time with two digits; do not add words after the time." \
        in done.candidate
    assert "Read the question; work out" not in done.candidate
    cut = dict(done.artifacts)["merged_patch"]["left_out"]
    assert len(cut) == 1 and "again; kept only '- Write each field of the time" in cut[0]
    assert "merge: 1 cut to the clauses the skill lacks" in done.losses()


def test_a_merge_in_the_wrong_shape_keeps_every_rule() -> None:
    def wrong(request: ChatRequest) -> str:  # edits where rules were asked for
        return json.dumps({"reasoning": "x", "edits": [{"op": "replace", "anchor": "",
                                                        "content": "Be brief."}]})

    done, _ = _through(RULE_PATCHES, wrong, _settings("rules"))
    assert len(_merged(done).repaired) == 4  # no rule read from it: each one put back
    assert done.report.count("applied") == 4

    done, _ = _through(RULE_PATCHES, lambda request: "not JSON at all", _settings("rules"))
    assert "unmerged" in (_merged(done).error or "")
    assert done.report.count("applied") == 4


def test_an_op_the_merge_invented_goes_back_to_the_proposal_s() -> None:
    patches = [
        Patch(source="failure", tasks=("t1",), edits=(
            Edit(op="append", content="- Reply with the time difference only."),)),
        Patch(source="failure", tasks=("t2",), edits=(
            Edit(op="insert_after", anchor="Read the question.",
                 content="Note the format the question asks for."),)),
    ]

    def small_model(request: ChatRequest) -> str:  # replace with an empty anchor, an anchor
        return json.dumps({"reasoning": "merged", "edits": [  # that is not in the skill
            {"op": "replace", "anchor": "", "content": "- Reply with the time difference only.",
             "rationale": "r", "support": 1},
            {"op": "insert_after", "anchor": "Read the task carefully.",
             "content": "Note the format the question asks for.", "rationale": "r",
             "support": 1}]})

    done, _ = _through(patches, small_model, _settings("edits"))
    merged = _merged(done)
    assert [(e.op, e.anchor) for e in merged.edits] == [
        ("append", ""), ("insert_after", "Read the question.")]
    assert [r.split(": the merge's ")[1] for r in merged.repaired] == [
        "replace with an empty anchor restored to the proposal's append",
        "insert_after with an anchor not in the skill restored to the proposal's insert_after"]
    assert done.report.count("applied") == 2
    assert done.candidate.index("Read the question.\nNote the format") > 0


def test_suggestions_are_folded_without_a_merge_call() -> None:
    patches = [Patch(source="failure", suggestions=(
        Suggestion(type="add_rule", description=f"Rule {i}.", rationale="r"),)) for i in range(3)]
    model = ScriptedModel(default="unused")
    proposal = aggregate_stage(SKILL, patches, model, _settings("edits",
                                                               "rewrite_from_suggestions"))
    assert len(proposal.items) == 3 and not model.calls


def bad_merge(request: ChatRequest) -> Any:
    """The toy's optimizer, but its merge turns the rule into a replace with an empty anchor
    (put back) and adds an insert after a line the skill does not have (lost at update)."""
    import toy

    if request.kind != "merge":
        return toy.optimizer(request)
    found = re.findall(r"content: '(.*)'", request.messages[0].text())
    return {"reasoning": "merged", "edits": [
        {"op": "replace", "anchor": "", "content": found[0], "rationale": "r", "support": 3},
        {"op": "insert_after", "anchor": "Read the manual first.", "rationale": "r",
         "content": "Check the item's name.", "support": 1}]}


def test_the_stage_that_lost_an_edit_is_named_in_the_step_line_and_show(
        toy_dir: Path) -> None:
    from conftest import toy_config

    cfg = toy_config(toy_dir, "test_merge_survival:bad_merge",
                     train={"num_epochs": 1, "steps_per_epoch": 1},
                     gradient={"minibatch_size": 2, "failure_only": True},
                     optimizer={"learning_rate": 4, "min_learning_rate": 4})
    proc = cli("train", str(cfg), "--out", str(toy_dir / "run"))
    assert proc.returncode == 0, proc.stderr
    record = json.loads((toy_dir / "run" / "steps" / "e01-s001" / "record.json").read_text())
    assert record["losses"][0] == "merge: 1 put back"
    assert record["losses"][1].startswith("update skipped 1: anchor not found (best line ")
    assert len(record["losses"]) == 2
    said = proc.stdout + proc.stderr
    assert "merge: 1 put back; update skipped 1: anchor not found" in " ".join(said.split())
    # The selection split is called so, as in the README and on the dashboard.
    assert "), selection " in said and "eval selection of skill" in said
    assert "), val " not in said and "eval val " not in said
    shown = cli("show", str(toy_dir / "run")).stdout
    assert "on the way to the candidate: merge: 1 put back; update skipped 1" in " ".join(
        shown.split())


def test_the_file_a_package_edit_names_survives_a_merge_that_leaves_it_out() -> None:
    """Two minibatches each start a reference file of a skill package; the merge answers with
    the edits but without their files. Each is put back in the file it was proposed for."""
    from skillgrad.package import join_package, split_package

    skill = join_package(SKILL, {"references/format.md": "# Format\n\nHH:MM.\n"})
    patches = [
        Patch(source="failure", tasks=("t1",), edits=(
            Edit(op="append", file="references/seconds.md",
                 content="Give seconds when the question asks for HH:MM:SS."),)),
        Patch(source="failure", tasks=("t2",), edits=(
            Edit(op="insert_after", anchor="# Format", content="Two digits a field."),)),
    ]
    seen: list[ChatRequest] = []

    def small_model(request: ChatRequest) -> str:
        seen.append(request)
        return json.dumps({"reasoning": "merged", "edits": [
            {"op": "append", "anchor": "", "file": "", "rationale": "r", "support": 1,
             "content": "Give seconds when the question asks for HH:MM:SS."},
            {"op": "insert_after", "anchor": "# Format", "file": "", "rationale": "r",
             "support": 1, "content": "Two digits a field."}]})

    done, _ = _through(patches, small_model, _settings("edits"), skill)
    assert "file: references/seconds.md" in seen[0].messages[-1].text()  # the merge is shown it
    assert "PackageEditReply" in json.dumps(seen[0].json_schema)
    merged = _merged(done)
    assert [e.file for e in merged.edits] == ["references/seconds.md", ""]
    assert merged.repaired == ("edit 'Give seconds when the question asks for HH:MM:SS.': the "
                               "file the merge left out restored to the proposal's "
                               "references/seconds.md",)
    package = split_package(done.candidate)
    assert package.files["references/seconds.md"] == (
        "Give seconds when the question asks for HH:MM:SS.\n")
    assert package.files["references/format.md"] == "# Format\nTwo digits a field.\n\nHH:MM.\n"
    assert package.main == SKILL
