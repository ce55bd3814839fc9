"""Rules a person would ship pass hygiene and the restatement checks on every kind of task:
over-refusal checked on real environments (the bundled quickstart and reading sets and the
held-out kinds ``bench/format_tasks.py`` writes, at two seeds each), with each step's evidence
made by the environment's own rollouts of replies that fail the way a small target fails (the
answer inside a sentence, a digit off, the right value). Beside them, near misses that are
still refused, so that no check here passes by refusing nothing."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillgrad.build import build_environment
from skillgrad.config import load_config
from skillgrad.models.scripted import ScriptedModel
from skillgrad.records import Edit, Task, render_expected
from skillgrad.stages.hygiene import Evidence, clean_text
from skillgrad.stages.restated import against_skill

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "format_tasks.py"

# Rules for any question set.
GENERAL = [
    "- Reply with the answer alone: no full sentence, no explanation.",
    "- If the question names a format, write the answer in exactly that format.",
    "- Copy names and numbers exactly as the context writes them.",
    "- Before you answer, find the sentence of the context that answers the question.",
    "- Write numbers as digits, without thousands separators.",
    "- Keep the answer line to the answer itself; put any working above it.",
    "- Limit your reply to the answer.",
    "- Do not repeat the question in your reply.",
    "- When the question asks for a number only, give the number without its unit.",
    "- For a yes/no question, answer yes or no in lower case.",
    "- For a question that asks how many, reply with the number alone, without the noun.",
    "- For a year, give its four digits alone.",
    "- Give a name in full, as the context spells it.",
    "- Answer with the shortest span of the context that answers the question.",
    "- If the context does not say, answer from what you know; never leave the answer line "
    "empty.",
    "- For a question that asks when, give the date or year exactly as the context writes it.",
    "- Reply with only the name when the question asks who.",
    "- For a yes/no question, answer \"yes\" or \"no\" in lower case, and nothing else.",
    "- Do not mix up two entities of the same kind mentioned in one passage.",
    "- Check that the fact you found belongs to the same person, ship, town or company the "
    "question names, not to a rival or relative mentioned nearby.",
]
BY_KIND = {
    "units": [
        "- Write each unit as its symbol, never as a word.",
        "- When the question asks for the unit symbol, write the number, a space and the symbol.",
        "- Multiply or divide by the factor between the two units, then check that the result's "
        "size makes sense.",
        "- Write the unit symbol the question asks for (for example `m`, `g` or `min`), not the "
        "unit's name.",
        "- A question that says 'the number only' wants no unit at all.",
        "- Give the value with the precision the question uses; do not round.",
        "- Kilo means a thousand: multiply kilometres by 1000 to get metres.",
        "- Before you answer, check which unit the question converts to, and write your answer "
        "in that unit.",
    ],
    "times": [
        "- Write every field of a time with two digits, so a single-digit hour gets a leading "
        "zero.",
        "- Use the format the question asks for: HH:MM or HH:MM:SS.",
        "- If the question asks for HH:MM:SS, include the seconds even when they are 00.",
        "- Work out the difference in seconds first, then convert it to hours, minutes and "
        "seconds.",
        "- To find when something ended, add the duration to the start time and carry over 60 "
        "minutes into an hour.",
        "- When the end time is past midnight, add 24 hours to it before you subtract.",
        # Numbers that are fields of some question's times ("12:00:40"), but no time of any.
        "- Answer on the 24-hour clock; convert AM/PM inputs first (12 AM = 00, 12 PM = 12, "
        "3 PM = 15).",
        "- Carry whenever minutes or seconds reach 60: 45 min + 30 min is 1 h 15 min.",
    ],
    "dates": [
        "- Write the date in exactly the format the question asks for, with two digits for a day "
        "or month where the format has DD or MM.",
        "- Write the month with two digits in DD/MM/YYYY and YYYY-MM-DD (April is 04).",
        "- When the format is 'Month D, YYYY', write the month's name in full and the day "
        "without a leading zero.",
        "- To add days to a date, count forward month by month, remembering that September has "
        "30 days.",
        "- Check whether the year is a leap year before you count past the end of February.",
        # A form a clause begins with is its scope, not the one form for every task.
        "- In \"Month D, YYYY\", spell the month in full with a capital letter and don't pad the "
        "day: `March 5, 2024`, not `March 05, 2024` or `Mar 5, 2024`.",
        "- Never swap day and month: in DD/MM/YYYY, e.g. `04/07/2023` is 4 July, not April 7.",
        # A purpose says when, as a condition does.
        "- To add N days, first use up the days left in the current month, then go on month "
        "by month until the rest fits in a month.",
    ],
    "letters": [
        "- To count letters, first spell the word out one letter per line, then count the lines.",
        "- Count upper- and lower-case letters alike.",
        "- The vowels are a, e, i, o and u; do not count y as a vowel.",
        "- A letter that appears twice in a row counts twice.",
        "- Reply with the count as a number, not as a word.",
    ],
}
# Rules for the bundled environments of several turns.
BY_EXAMPLE = {
    "math": [
        "- Work through the problem step by step before you give the answer.",
        "- Give the final answer as a number alone, without units or words.",
        "- Check each step's arithmetic before you go on to the next.",
        "- When the problem gives a percentage, turn it into a fraction before you multiply.",
        "- Do not round until the last step.",
    ],
    "doc_qa": [
        "- Search before you answer; never answer from memory.",
        "- Open the document the search ranks first, then read the section whose title fits "
        "the question.",
        "- Reply with the few words of the section that answer the question, nothing else.",
        "- Search with the names and key words of the question.",
    ],
}
KINDS = [("units", 7), ("units", 1), ("times", 0), ("times", 3), ("dates", 0), ("dates", 3),
         ("letters", 0), ("letters", 2)]


def _failing(gold: str, k: int) -> str:
    """A reply that fails as a small target's does: the answer in a sentence, a digit off,
    or the answer itself (so the evidence holds replies, gold answers and failure reasons)."""
    if k % 3 == 0:
        return f"The answer to the question is {gold}, as the context says."
    if k % 3 == 1 and re.search(r"\d", gold):
        return "Answer: " + re.sub(r"\d", lambda m: str((int(m.group()) + 1) % 10), gold,
                                   count=1)
    return f"Answer: {gold}"


def _steps(config: Path) -> Iterator[tuple[Evidence, str, list[Task]]]:
    """The evidence of each step of six training tasks, and the initial skill."""
    env = build_environment(load_config(config))
    skill = env.initial_skill()
    tasks = env.tasks("train")
    for start in range(0, len(tasks), 6):
        batch = tasks[start:start + 6]
        results = []
        for k, task in enumerate(batch):
            gold = render_expected(task.reference).split(" or ")[0].strip("'\"")
            results.append(env.rollout(task, skill, ScriptedModel(default=_failing(gold, k))))
        yield Evidence.of(results, {t.id: t for t in batch}), skill, batch


def _changed(config: Path, rules: list[str]) -> list[str]:
    out: list[str] = []
    for evidence, skill, batch in _steps(config):
        for rule in rules:
            cleaned = clean_text(rule, evidence, skill)
            if cleaned.clean != rule:
                why = "; ".join(q.reason() for _, q in (*cleaned.removed, *cleaned.repaired))
                out.append(f"{rule!r} on {batch[0].id}..: {cleaned.clean!r} ({why})")
    skill = build_environment(load_config(config)).initial_skill()
    out += [f"{rule!r}: {said[0]}" for rule in rules
            if (said := against_skill(Edit(op="append", content=rule), skill)) is not None]
    return out


@pytest.fixture(scope="module")
def kinds(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], Path]:
    out: dict[tuple[str, int], Path] = {}
    for kind, seed in KINDS:
        folder = tmp_path_factory.mktemp(f"{kind}{seed}")
        subprocess.run([sys.executable, str(SCRIPT), str(folder), "--kind", kind, "--seed",
                        str(seed)], check=True, capture_output=True)
        out[(kind, seed)] = folder / "config.yaml"
    return out


@pytest.mark.parametrize("example", ["quickstart", "reading"])
def test_a_persons_rules_pass_on_the_bundled_question_sets(example: str) -> None:
    assert _changed(ROOT / "examples" / example / "config.yaml", GENERAL) == []


@pytest.mark.parametrize("example", sorted(BY_EXAMPLE))
def test_a_persons_rules_pass_on_the_bundled_sets_of_several_turns(example: str) -> None:
    """A document question answered "words" does not make "the few words of the section" its
    answer: a word of the optimizer's own prompts is the vocabulary rules are written in."""
    assert _changed(ROOT / "examples" / example / "config.yaml", BY_EXAMPLE[example]) == []


@pytest.mark.parametrize(("kind", "seed"), KINDS)
def test_a_persons_rules_pass_on_held_out_kinds(kinds: dict[tuple[str, int], Path], kind: str,
                                                 seed: int) -> None:
    assert _changed(kinds[(kind, seed)], GENERAL + BY_KIND[kind]) == []


@pytest.mark.parametrize(("kind", "seed", "rule"), [
    # Each a near miss of a rule above, refused or given the task's form on some step.
    ("dates", 0, "- Write the date as 'Month D, YYYY'."),  # one request's form, for all
    ("dates", 0, "- Write the date as YYYY-MM-DD."),
    ("dates", 0, "- Use YYYY-MM-DD, not MM/DD/YYYY."),  # the other form is what not to write
    ("dates", 0, "- Write the date in DD/MM/YYYY, then check it."),  # what to write, not a scope
    ("dates", 0, "- Count the days left in the current month first."),  # one question's days
    ("units", 7, "- Write the unit symbol, not the name of the unit."),  # no condition
    ("units", 7, "- Limit your reply to the expected answer."),  # the reference
    ("units", 7, "- Compare your reply to the answer."),
    ("times", 0, "- Reply with the time difference in HH:MM:SS format."),
    # One template's thing ("A phone call started at ..."), as the accepted rule had it.
    ("times", 0, "- Include the full duration of the call in seconds."),
    ("units", 7, "- Give the value in seconds."),  # one template's form, for every task
])
def test_near_misses_are_still_refused_or_repaired(kinds: dict[tuple[str, int], Path],
                                                   kind: str, seed: int, rule: str) -> None:
    assert _changed(kinds[(kind, seed)], [rule]) != []


def test_rules_made_of_one_kind_of_question_still_say_when() -> None:
    """The quickstart's "just the date" rule, written from one date question, is refused
    without its condition and passes with it, worded either way; so is one yes/no answer made
    the answer to every question."""
    config = ROOT / "examples" / "quickstart" / "config.yaml"
    assert _changed(config, ["- Give the date exactly as the context writes it."]) != []
    assert _changed(config, ["- For every question that you answer, give the date exactly as "
                             "the context writes it."]) != []  # a condition that names nothing
    assert _changed(config, ['- Answer "yes" in lower case.']) != []
    assert _changed(config, ["- For questions that ask when, give the date exactly as the "
                             "context writes it."]) == []


def test_a_time_one_question_gives_is_still_that_questions(
        kinds: dict[tuple[str, int], Path]) -> None:
    """Its fields alone name no task; the time whole does."""
    evidence, skill, batch = next(_steps(kinds[("times", 0)]))
    time = re.search(r"\d\d:\d\d(?::\d\d)?", batch[0].prompt)
    assert time is not None
    cleaned = clean_text(f"- Start from {time.group(0)} and count forward.", evidence, skill)
    assert cleaned.clean is None
