"""Prompt templates: every placeholder filled, every value used, values never re-expanded."""

from __future__ import annotations

from importlib.resources import files

import pytest

from skillgrad import prompts

NAMES = sorted(
    p.name.removesuffix(".md") for p in files("skillgrad.prompts").iterdir() if p.name.endswith(".md")
)

# What the stages pass in; a template losing or gaining a placeholder shows up here.
ANALYST = {"skill", "meta", "rejected", "count", "trajectories", "max_edits", "constraints",
           "aware", "aware_reply"}
EXPECTED = {
    "analyst_failure": ANALYST | {"breakdown"},
    "analyst_success": ANALYST,
    "analyst_rules": {"skill", "meta", "rejected", "count", "contrast", "max_edits", "setting",
                      "constraints"},
    "suggest_failure": ANALYST | {"breakdown"},
    "suggest_success": ANALYST,
    "merge": {"kind", "skill", "meta", "proposals", "max_edits"},
    "merge_rules": {"kind", "skill", "meta", "proposals", "max_edits"},
    "trigger": {"skill_name", "description", "skill", "requests", "loaded", "chose",
                "max_chars"},
    "merge_final": {"skill", "meta", "failure", "success", "max_edits"},
    "rank": {"budget", "count", "skill", "meta", "rejected", "edits", "kind"},
    "learning_rate": {"kind", "schedule_budget", "ceiling", "skill", "meta", "rejected",
                      "history", "count", "edits"},
    "rewrite": {"skill", "blocks", "meta", "suggestions", "constraints"},
    "rewrite_minibatch": {"skill", "blocks", "meta", "rejected", "count", "trajectories",
                          "constraints"},
    "slow_update": {"previous", "skill", "meta", "counts", "shown", "pairs", "constraints"},
    "meta_skill": {"meta", "history", "counts", "pairs"},
    "consolidate": {"count", "limit", "skill", "reminders"},
    "sleep_mine": {"evidence", "draft"},
    "sleep_judge": {"intent", "rubric", "answer"},
    "judge": {"episode", "facts", "modes"},
    "export_describe": {"skill_name", "skill", "max_chars"},
    "skill_aware_failure": set(),
    "skill_aware_success": set(),
}


def test_all_templates_are_known() -> None:
    assert NAMES == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_template_placeholders(name: str) -> None:
    assert prompts.placeholders(prompts.template(name)) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_template_renders(name: str) -> None:
    values = {key: f"<<{key.upper()}-VALUE>>" for key in EXPECTED[name]}
    text = prompts.render(name, **values)
    for value in values.values():
        assert value in text
    assert "{{" not in text and "}}" not in text
    assert text.strip()


def test_missing_value_raises() -> None:
    with pytest.raises(KeyError, match=r"missing \['trajectories'\]"):
        prompts.render("analyst_failure", skill="s", meta="", rejected="", count="1",
                       max_edits="2", constraints="", aware="", aware_reply="", breakdown="")


def test_unused_value_raises() -> None:
    values = {key: "v" for key in EXPECTED["rank"]}
    with pytest.raises(KeyError, match=r"unused \['extra'\]"):
        prompts.render("rank", **values, extra="x")


def test_unknown_template_raises() -> None:
    with pytest.raises(FileNotFoundError):
        prompts.template("no_such_prompt")


def test_values_are_not_expanded() -> None:
    values = {key: key for key in EXPECTED["merge"]}
    values["skill"] = "Use {{kind}} and {{ max_edits }} literally."
    values["kind"] = "FAILED"
    text = prompts.render("merge", **values)
    assert "Use {{kind}} and {{ max_edits }} literally." in text
    assert "of FAILED tasks" in text


def test_placeholder_regex_tolerates_spaces_and_ignores_non_names() -> None:
    assert prompts.placeholders("{{ a }} {{b_2}} {{Upper}} {{1x}} {x}") == {"a", "b_2"}


def test_values_with_regex_specials_are_literal() -> None:
    values = {key: "v" for key in EXPECTED["merge"]}
    values["proposals"] = r"\1 \g<0> $& backslash\n"
    assert r"\1 \g<0> $& backslash\n" in prompts.render("merge", **values)
