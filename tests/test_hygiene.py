"""Skill hygiene: edits that quote training items, echo the scorer's feedback or copy the
prompt's scaffolding are refused before any rollout; edits that change nothing give their place
to the next ranked edit."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import toy
from conftest import toy_config

from skillgrad.config import load_config
from skillgrad.models.messages import Message
from skillgrad.records import Edit, Refused, RolloutResult, Task
from skillgrad.rundir import read_jsonl
from skillgrad.stages.hygiene import Evidence, asked_in_condition, clean_text, find_quote
from skillgrad.testing import scripted_optimizer
from skillgrad.trainer import build_trainer

PASSAGE = ("The Selmarsh tin works opened in 1871. Tin tends rather easily to form hard, brittle "
           "intermetallic phases, which made the early castings crack.")
SCAFFOLD = "Read the passage below carefully and then answer the question that follows it."
REASON = ("answer 'the castings cracked' does not match gold 'brittle intermetallic phases': it "
          "contains the gold answer plus extra words, and scoring is exact match (token F1 0.40)")


def _result(task_id: str, context: str, question: str, reason: str = "") -> RolloutResult:
    user = f"{SCAFFOLD}\n\nPassage: {context}\n\nQuestion: {question}"
    return RolloutResult(task_id=task_id, answer="x", hard=0.0 if reason else 1.0,
                         soft=0.0, reason=reason,
                         messages=(Message(role="system", content="skill"),
                                   Message(role="user", content=user),
                                   Message(role="assistant", content="x")))


def _evidence() -> Evidence:
    results = [_result("t1", PASSAGE, "Why did the castings crack?", REASON),
               _result("t2", "Ravenby has a harbour that froze in the winter of 1902.",
                       "When did the harbour freeze?"),
               _result("t3", "The mill paid 26,100 crowns for its new wheel.",
                       "What did the wheel cost?")]
    tasks = {"t1": Task(id="t1", prompt="", reference={"answers": ["brittle intermetallic phases"]}),
             "t2": Task(id="t2", prompt="", reference=["1902"]),
             "t3": Task(id="t3", prompt="", reference={"answers": ["26100 crowns"]})}
    return Evidence.of(results, tasks)


def test_a_run_of_words_from_one_tasks_input_quotes_that_item() -> None:
    quote = find_quote("The answer should include the behavior that tin tends rather easily to "
                       "form hard, brittle phases.", _evidence())
    assert quote is not None and quote.kind == "instance" and quote.task_id == "t1"
    assert "tin tends rather easily to form hard" in quote.quoted
    assert "training item 't1'" in quote.reason()


def _replied(task_id: str, question: str, reply: str) -> RolloutResult:
    return RolloutResult(task_id=task_id, answer=reply, hard=0.0, soft=0.0, reason="wrong",
                         messages=(Message(role="system", content="skill"),
                                   Message(role="user", content=question),
                                   Message(role="assistant", content=reply)))


def test_a_phrase_only_one_reply_holds_quotes_that_item() -> None:
    """The agent's reply to one task names its specifics in words of its own; a rule that
    carries them is refused, while the phrasing most replies share is not."""
    results = [_replied("t1", "How much do 3 more plants cost?", "I will include the total cost of the "
                        "additional plants. So my final answer for this task is: 42"),
               _replied("t2", "How many left?", "Let me count. So my final answer for this "
                        "task is: 7"),
               _replied("t3", "How far is it?", "Distance first. My final answer for this task "
                        "is: 9 km")]
    evidence = Evidence.of(results)
    quote = find_quote("Always include the total cost of the additional plants.", evidence)
    assert quote is not None and quote.kind == "reply" and quote.task_id == "t1"
    assert "the agent's reply to training item 't1'" in quote.reason()
    assert find_quote("End with one line: my final answer for this task is: N.", evidence) is None
    # a run of general words one reply happens to hold is a general rule
    results.append(_replied("t4", "How old is the tree?", "I should check every number twice "
                            "before I answer. So my final answer for this task is: 40"))
    assert find_quote("You should check every number twice before you answer.",
                      Evidence.of(results)) is None
    # words the skill already holds are its own
    assert find_quote("Always include the total cost of the additional plants.", evidence,
                      skill="Include the total cost of the additional plants.") is None


def test_two_names_or_numbers_of_one_item_describe_it_however_worded() -> None:
    """A paraphrase that shares no run of words with the task still names its specifics."""
    results = [_result("t1", "The Northern Plover, a trawler, is 65 metres long.",
                       "Is the Northern Plover longer than 71 metres?", "wrong"),
               _result("t2", "Ravenby has a harbour that froze in the winter of 1902.",
                       "When did the harbour freeze?"),
               _result("t3", "The mill paid 26,100 crowns for its new wheel.",
                       "What did the wheel cost?")]
    evidence = Evidence.of(results)
    quote = find_quote("When asked if the Plover exceeds 71 metres, compare its length (65 "
                       "metres) with that.", evidence)
    assert quote is not None and quote.kind == "names" and quote.task_id == "t1"
    assert "plover" in quote.quoted and "71" in quote.quoted
    # one number, or names at the start of a sentence, describe no item
    assert find_quote("Compare two lengths before you answer yes or no, e.g. 1902 vs 1903.",
                      evidence) is None
    assert find_quote("When did it happen? Answer with the year alone.", evidence) is None


def test_a_word_of_evaluation_the_agent_never_sees_is_an_echo() -> None:
    results = [_result(f"t{i}", f"Item {i} is blue.", f"What colour is item {i}?",
                       f"answer 'it is blue' does not match gold 'blue{i}': it contains the "
                       "gold answer plus extra words") for i in range(3)]
    evidence = Evidence.of(results)
    quote = find_quote("The answer should be the gold answer itself.", evidence)
    assert quote is not None and quote.kind == "feedback" and quote.quoted == "gold"
    assert find_quote("Reply with the answer alone, without extra words.", evidence) is None
    # where it only qualifies the next word, screening drops it and keeps the instruction
    kept = clean_text("Provide only the exact gold answer, without extra words.", evidence)
    assert kept.clean == "Provide only the exact answer, without extra words."
    assert [(part, q.kind) for part, q in kept.repaired] == [("gold", "feedback")]
    # a word the agent does see is its own to use
    seen = [_result("t9", "The gold medal went to Oslo.", "Who won the gold?", "wrong")]
    assert find_quote("If a question names a medal, say who won the gold.",
                      Evidence.of(results + seen)) is None


def test_a_gold_answer_is_an_instance_fact_however_it_is_written() -> None:
    ev = _evidence()
    quote = find_quote("When the question asks about cost, answer 26,100 crowns.", ev)
    assert quote is not None and quote.kind == "answer" and quote.task_id == "t3"
    quote = find_quote("Years are four digits, e.g. 1902.", ev)
    assert quote is not None and quote.task_id == "t2"


def test_the_scorers_feedback_is_not_a_rule() -> None:
    quote = find_quote("Answer without extra words: it contains the gold answer plus extra words, "
                       "and scoring is exact match.", _evidence())
    assert quote is not None and quote.kind == "feedback"


def test_a_short_run_of_the_scorers_own_words_is_feedback_too() -> None:
    """"gold answer" is in no task input: the agent can do nothing with it."""
    quote = find_quote("Do not write the gold answer plus extra text.", _evidence())
    assert quote is not None and quote.kind == "feedback" and "gold answer" in quote.quoted
    # Held against the reply, the same words speak of the unseen reference first.
    quote = find_quote("Make sure the reply does not contain the gold answer plus extra text.",
                       _evidence())
    assert quote is not None and quote.kind == "unseen"
    assert find_quote("Do not add extra words to the answer.", _evidence()) is None


def test_a_sound_sentence_is_kept_apart_from_a_pasted_verdict() -> None:
    result = clean_text("Check the answer: it contains the gold answer plus extra words, and scoring "
                    "is exact match. Instead, reply with the shortest phrase that answers.",
                    _evidence())
    assert result.clean == "Reply with the shortest phrase that answers."
    assert [q.kind for _, q in result.removed] == ["feedback"]
    assert clean_text("Do not add extra words.", _evidence()).clean == "Do not add extra words."
    assert clean_text("It contains the gold answer plus extra words.", _evidence()).clean is None


def test_the_name_every_task_of_one_group_shares_is_still_that_items() -> None:
    """A step whose tasks all ask about one ferry: its name is in every input, and still not
    scaffolding, since the tasks are one group."""
    context = ("The Silver Gannet is a ferry launched in 2018 at the Calford shipyard. She is "
               "107 metres long and carries a crew of 7.")
    questions = {"g1": "Is the Silver Gannet longer than 113 metres?",
                 "g2": "When was the Silver Gannet launched?",
                 "g3": "How long is the Silver Gannet?",
                 "g4": "Where was the Silver Gannet built?"}
    results = [_result(i, context, q, "answer 'Yes' does not match gold 'no'" if i == "g1"
                       else "") for i, q in questions.items()]
    rule = "Reply with 'no' if the Silver Gannet is not longer than 113 metres."

    def quote(group: str | None) -> Any:
        tasks = {i: Task(id=i, prompt="", reference=["x"], group=group) for i in questions}
        return find_quote(rule, Evidence.of(results, tasks))

    found = quote("ferry")
    assert found is not None and found.kind == "instance" and "113" in found.quoted
    # Four separate items sharing a name: "longer than 113" is still the one item's fact.
    found = quote(None)
    assert found is not None and (found.kind, found.quoted, found.task_id) == (
        "instance", "longer than 113", "g1")
    assert find_quote("Reply with 'no' if the Silver Gannet is not longer than it.",
                      Evidence.of(results, {i: Task(id=i, prompt="", reference=["x"])
                                            for i in questions})) is None
    assert find_quote("Reply with 'no' when the thing asked about is shorter.",
                      Evidence.of(results, {i: Task(id=i, prompt="", group="ferry")
                                            for i in questions})) is None


def test_the_optimizers_own_instructions_are_not_a_rule() -> None:
    """A small optimizer copies the prompt's instructions to it into its rules; each of
    skillgrad's prompt templates counts, as the words it fixes."""
    copied = ("If they miss part of it, say what to include. If they took wrong steps, say "
              "which steps to take.")
    quote = find_quote(copied, _evidence())
    assert quote is not None and quote.kind == "instructions"
    assert "say what to include" in quote.quoted
    assert "optimizer prompt's own instructions" in quote.reason()
    assert find_quote("Before you answer, leave out every word the question did not ask for.",
                      _evidence()) is None
    mine = Evidence.of([], None, instructions=["Tell the agent to reply in one short plain line."])
    assert find_quote("Always reply in one short plain line.", mine) is not None
    assert find_quote(copied, mine) is None  # only the prompts given count


def test_a_bullet_keeps_its_marker_when_its_first_sentence_is_left_out() -> None:
    result = clean_text("- Check the answer: it contains the gold answer plus extra words, and "
                    "scoring is exact match. Instead, reply with the shortest phrase.",
                    _evidence())
    assert result.clean == "- Reply with the shortest phrase."


def test_text_refused_earlier_stays_refused_when_it_comes_back() -> None:
    """The rejected buffer shows a refused text again; proposing it again is still refused,
    even in a step whose own feedback no longer holds it."""
    earlier = "Ensure the reply never carries the words the grader flagged last time."
    ev = Evidence.of([], None, refused=[earlier])
    quote = find_quote("Always ensure the reply never carries the words the grader flagged.", ev)
    assert quote is not None and quote.kind == "refused"
    assert find_quote("Reply with the shortest phrase.", ev) is None


def test_a_refused_texts_other_words_may_come_again() -> None:
    """A text refused earlier for some of its words is repeated only by a text with those
    words: the words around them ("Before you answer, ensure the reply ...") are free. Refused
    on a time-arithmetic set, and then its condition with them, which is a good rule."""
    earlier = ("- Before you answer, ensure the reply ends with the answer's format.",
               "the reply ends with the answer")
    assert find_quote(earlier[0], Evidence()) is not None  # it was refused for those words
    ev = Evidence.of([], None, refused=[earlier])
    assert find_quote("- Before you answer, ensure the reply ends with the format the task "
                      "asks for (HH:MM or HH:MM:SS).", ev) is None
    # With them, it repeats the refusal, whatever this step's evidence holds.
    ferry = ("- Before you answer, check the Zarnow ferry timetable first.", "zarnow ferry")
    ev = Evidence.of([], None, refused=[ferry], instructions=[])
    quote = find_quote("- Always check the Zarnow ferry timetable.", ev)
    assert quote is not None and (quote.kind, quote.quoted) == (
        "refused", "check the zarnow ferry timetable")
    assert find_quote("- Before you answer, check the timetable first.", ev) is None
    # Names refused together are each refused where they stand; the rest of the text is free.
    dates = ("- Before you answer, ensure that the year 2024 is included. If the day is missing, "
             "add '20' to the day part of the date.", "2024, 20")
    ev = Evidence.of([], None, refused=[dates], instructions=[])
    quote = find_quote("- Before you answer, ensure that the year is included. If the day is "
                       "missing, add '20' to the day part of the date.", ev)
    assert quote is not None and quote.kind == "refused" and "20" in quote.quoted.split()
    assert find_quote("- Before you answer, ensure that the year is included in the date.",
                      ev) is None
    # Without the words, any five in a row repeat it, as before.
    whole = Evidence.of([], None, refused=[dates[0]], instructions=[])
    assert find_quote("- Before you answer, ensure that the year is included in the date.",
                      whole) is not None


def test_the_prompts_scaffolding_is_not_a_rule() -> None:
    quote = find_quote("Read the passage below carefully and then answer the question.",
                       _evidence())
    assert quote is not None and quote.kind == "scaffolding" and quote.task_id is None


def test_general_rules_pass_and_the_skills_own_words_never_count() -> None:
    ev = _evidence()
    for rule in ("Reply with the shortest phrase from the passage that answers the question.",
                 "When the question asks for a number, give the number alone, without units.",
                 "If the answer is a year, write its four digits.",
                 "Your reply contains only the answer span.",
                 "Make sure your reply includes the final answer on its last line.",
                 "Do not add extra words."):
        assert find_quote(rule, ev) is None, rule
    skill = f"# Skill\n\n{SCAFFOLD}\n"
    assert find_quote(SCAFFOLD + " Keep it short.", ev, skill) is None


@pytest.mark.parametrize(("rule", "kind", "phrase"), [
    # Accepted once on a held-out reading set: the agent never sees "the answer".
    ("Before you answer, compare the length of your reply with the answer. If your reply is "
     "longer than the answer, leave out the extra words.", "unseen", "your reply with the answer"),
    ("If your reply is incorrect, provide the correct answer.", "unseen",
     "If your reply is incorrect"),
    ("Make sure your reply matches the expected answer format.", "unseen",
     "your reply matches the expected answer"),
    # Accepted by the quickstart on the 1.5B model: the reply held against "the answer".
    ("Ensure the agent's reply contains the exact the answer or a shortened version of it.",
     "unseen", "the agent's reply contains the exact the answer"),
    ("If the reply does not include the answer, include it in the reply.", "unseen",
     "the reply does not include the answer"),
    # Screened (the first) and accepted (the second) by the quickstart on the 1.5B model.
    ("Before you answer, check the answer and the agent's reply for differences in length.",
     "unseen", "the answer and the agent's reply"),
    ("Before you answer, make sure the answer is exactly as expected.", "unseen",
     "answer is exactly as expected"),
    # Accepted, cut to this clause, on a unit-conversion set: the units held against the answer.
    ("Before you answer, check if the units match the answer; If the units are correct, use",
     "unseen", "match the answer"),
    # Screened by a time-arithmetic set: the form and words of the answer as what to match.
    ("Ensure your answer matches the exact form and content of the answer as closely as "
     "possible", "unseen", "matches the exact form and content of the answer"),
    ("Make sure the units match those of the expected answer.", "unseen",
     "match those of the expected answer"),
    ("Before you answer, make sure that your reply is grammatically correct and follows the "
     "form of the answer.", "unseen", "follows the form of the answer"),
    # Screened on a letter-counting set: the answer as the source of the reply.
    ("Reply with the exact number of vowels as stated in the answer.", "unseen",
     "stated in the answer"),
    # Accepted once on a time-arithmetic set: the relation words of the failure analysis.
    ("Reply in HH:MM:SS and the reply should share 1 word with the answer.", "analysis",
     "share 1 word with"),
    ("Give an answer that is part of an expected answer.", "analysis",
     "is part of an expected answer"),
    # Accepted by the reading example on the 1.5B model (the first two), and written beside.
    ("Before you answer, remove any words that are in the reply but not in the answer",
     "unseen", "the reply but not in the answer"),
    ("Before you answer, include any words that are not in the answer but are in the reply",
     "unseen", "not in the answer but are in the reply"),
    # Rolled out by the reading example on the 1.5B model: the answer reworded into the reply.
    ("- Before you answer, include any words that are not in the reply but are in the reply",
     "unseen", "words that are not in the reply"),
    ("Remove any words that are not in the reply", "unseen", "words that are not in the reply"),
    ("Reply with the answer, as read from the reply", "analysis", "as read from the reply"),
    ("Make the reply match word for word but for the characters.", "analysis",
     "word for word but for"),
    ("Write '03' where it expects '03'.", "analysis", "where it expects"),
    # Screened by the quickstart on the 1.5B model (and rejected by the gate): an expected
    # answer named by its value.
    ("Reply with 'no' for the 'Yes' answer.", "unseen", "the 'Yes' answer"),
    ("Write the number alone when the \u201c42\u201d correct answer is asked for.", "unseen",
     "the \u201c42\u201d correct answer"),
    # Proposed for an agent target: the analysts' prompt numbers the tasks it shows.
    ("Use the glob tool to look up filenames by glob pattern for Task 1", "unseen", "Task 1"),
    ("Use the Task tool to search for the file for Task 5 and Task 6", "unseen",
     "Task 5 and Task 6"),
    # Written by a unit-conversion analyst in lower case (and screened, before this check
    # read any case); a merge's "proposal 2" is no more the agent's.
    ("Reply with 'Answer: <number> millilitres' for task 1 and 2.", "unseen", "task 1 and 2"),
    ("Convert the mass as in tasks 3, 4 and 5.", "unseen", "tasks 3, 4 and 5"),
    ("Keep the unit symbol, as proposal 2 says.", "unseen", "proposal 2"),
])
def test_a_rule_about_what_the_agent_never_sees_is_refused(rule: str, kind: str,
                                                            phrase: str) -> None:
    quote = find_quote(rule, Evidence())  # no evidence needed: nothing of a task is quoted
    assert quote is not None and (quote.kind, quote.quoted) == (kind, phrase)
    assert quote.reason().startswith(
        "speaks of what the agent never sees" if kind == "unseen"
        else "echoes skillgrad's failure analysis")


def _times() -> Evidence:
    """A time-arithmetic batch of two question templates (no group in the data)."""
    questions = {
        "c1": "A call started at 09:15:10 and ended at 10:20:05. How long was the call, in "
              "HH:MM:SS?",
        "c2": "A call started at 11:02:00 and ended at 11:40:30. How long was the call, in "
              "HH:MM:SS?",
        "c3": "A call started at 07:00:15 and ended at 07:45:00. How long was the call, in "
              "HH:MM:SS?",
        "t1": "A train left at 08:00 and arrived at 09:30. How long was the trip, in HH:MM?",
        "t2": "A train left at 13:10 and arrived at 15:05. How long was the trip, in HH:MM?",
        "t3": "A train left at 06:45 and arrived at 07:20. How long was the trip, in HH:MM?",
        "t4": "A bus left at 10:00 and arrived at 10:50. How long was the trip, in HH:MM?",
    }
    results = [RolloutResult(task_id=i, messages=(Message(role="user", content=q),),
                             answer="x", hard=0.0, soft=0.0) for i, q in questions.items()]
    return Evidence.of(results, {i: Task(id=i, prompt=q, reference=["00:00"])
                                 for i, q in questions.items()})


def test_the_thing_one_task_or_one_template_introduces_is_theirs() -> None:
    """Screened on a times set: "- Reply with the duration of the meeting in the format the task
    asks for (HH:MM:SS or HH:MM).", where one question of six begins "A meeting began at ...".
    The rule names that task's thing for every task, as "the bus" names one question's here."""
    ev = _times()
    quote = find_quote("- Reply with the duration of the bus ride in the format the task asks "
                       "for.", ev)
    assert quote is not None and (quote.kind, quote.quoted, quote.task_id) == (
        "names", "bus", "t4")
    quote = find_quote("- Give the time the train arrived.", ev)
    assert quote is not None and (quote.kind, quote.quoted) == ("group", "train")
    for fine in ("- When the question is about a bus, give the time it arrived.",
                 "- Reply with the duration of the trip in the format the task asks for.",
                 "- Write every field of the time with two digits."):
        assert find_quote(fine, ev) is None, fine
    # A word one passage has in passing is no thing that task is about.
    asked = {"p1": "Context: The town grew for a time under the duke. Question: Who ruled it?",
             "p2": "Context: The river floods in May. Question: When does the river flood?",
             "p3": "Context: Ann painted the door blue. Question: What colour is the door?"}
    ev = Evidence.of([_result(i, "", q, "wrong") for i, q in asked.items()])
    assert find_quote("- Give the time as the context writes it.", ev) is None


def test_the_words_of_one_question_template_are_an_instance_fact() -> None:
    ev = _times()
    quote = find_quote("Reply in HH:MM:SS and include the full duration of the call in seconds.",
                       ev)
    assert quote is not None and quote.kind == "group" and "call" in quote.quoted.split()
    assert quote.reason().startswith("quotes what only one group of training items says")
    for rule in ("Give the duration in the format the question asks for.",
                 "When the question asks for HH:MM:SS, keep the seconds.",
                 "Subtract the start from the end, borrowing an hour when the minutes are short.",
                 "How long was it: count from the start time to the end time."):
        assert find_quote(rule, ev) is None, rule


def _units() -> Evidence:
    """A batch of unit conversions whose requests ask for the number alone or with its symbol."""
    asked = {"u1": ("A film measures 1.0 h. How much is that in minutes? Reply with the number "
                    "only.", "60"),
             "u2": ("How many kilograms are in 5 t? Reply with the number only.", "5000"),
             "u3": ("How many minutes are in 23 h? Reply with the number and the unit symbol.",
                    "1380 min"),
             "u4": ("How many centimetres are in 2.6 m? Answer with just the number.", "260"),
             "u5": ("Convert 0.24 min (a song) to seconds. Give the value in seconds, written "
                    "with its unit symbol.", "14.4 s"),
             "u6": ("How many metres are in 1.58 km? Answer with just the number.", "1580")}
    results = [RolloutResult(task_id=i, messages=(Message(role="user", content=q),),
                             answer="x", hard=0.0, soft=0.0) for i, (q, _) in asked.items()]
    return Evidence.of(results, {i: Task(id=i, prompt=q, reference=[a])
                                 for i, (q, a) in asked.items()})


def test_a_condition_may_name_what_some_requests_ask_for_in_their_words() -> None:
    # The lesson a person writes for conversions asked with or without the unit: its condition
    # is in the words of the requests of one kind, which a rule without the condition copies.
    ev = _units()
    for rule in ("- When the question asks for the number only, reply with the number alone.",
                 "- When the question asks for the number and the unit symbol, write the symbol "
                 "after the number, never the unit's name.",
                 "- If the task asks for the value written with its unit symbol, add it."):
        assert find_quote(rule, ev) is None, rule
    assert asked_in_condition("- If the task asks for the value with its unit, add it.") == [
        ("for", "the", "value", "with", "its", "unit")]
    for rule, kind, quoted in (
            ("- Reply with the number only.", "group", "the number only"),
            ("- Before you answer, reply with the number and the unit symbol.", "instance",
             "reply with the number and the unit symbol"),
            # What the questions of one task are about stays that task's, condition or not.
            ("- When the question asks how many minutes are in 23 h, give the symbol.",
             "instance", "how many minutes are in 23 h")):
        quote = find_quote(rule, ev)
        assert quote is not None and (quote.kind, quote.quoted) == (kind, quoted), (rule, quote)
    assert find_quote("- When the question asks for the full duration of the call in seconds, "
                      "keep the seconds.", _times()) is not None
    # One request's words, in a task that asks nothing with a question mark (a workbook task).
    asked = {"w1": "Copy every row whose Status is Done to sheet Report, in their original order.",
             "w2": "Write the total of column C in cell C10.",
             "w3": "Sort the rows of sheet Tasks by Owner.",
             "w4": "Write the average of column B in cell B12."}
    ev = Evidence.of([_result(i, "", q, "wrong") for i, q in asked.items()])
    assert find_quote("- When the task says 'in their original order', keep the rows in the "
                      "order of the source sheet.", ev) is None
    quote = find_quote("- Keep the rows in their original order.", ev)
    assert quote is not None and quote.task_id == "w1"


def test_a_quoted_example_is_a_tasks_value_only_where_the_task_holds_it_whole() -> None:
    # A person's line for times written without their leading zero: its example holds the "05"
    # of "10:20:05" and "15:05", and is the time of no question.
    ev = _times()
    assert find_quote("- Write every field of a time with two digits: `03:05`, not `3:5`.",
                      ev) is None
    quote = find_quote("- Write times with their seconds, as in `09:15:10`.", ev)
    assert quote is not None and quote.task_id == "c1"
    quote = find_quote("- Make sure the time starts with '07'.", ev)
    assert quote is not None and (quote.kind, quote.quoted) == ("names", "07")


def test_a_groups_verb_of_replying_and_a_form_a_thing_is_given_in_name_no_group() -> None:
    """A person's lines for dates asked in several formats. "Write the date" is how the
    conversion questions of a batch begin, and names no group's fact: "write" is the verb a
    request asks for its reply with. "A date given as DD/MM/YYYY" is what a rule reads, not
    the form it writes every answer in."""
    asked = {"w1": ("Write the date 2021-05-06 in the format DD/MM/YYYY.", "06/05/2021"),
             "w2": ("Write the date 09/11/2023 in the format Month D, YYYY.", "November 9, 2023")}
    asked |= {f"a{n}": (f"What is the date {n} days after 2020-01-{20 + n}? Give it in the "
                        f"format {form}.", "x")
              for n, form in enumerate(("YYYY-MM-DD", "Month D, YYYY", "DD/MM/YYYY",
                                        "YYYY-MM-DD"), 1)}
    results = [RolloutResult(task_id=i, messages=(Message(role="system", content="# Dates"),
                                                  Message(role="user", content=q)),
                             answer="x", hard=0.0, soft=0.0) for i, (q, _) in asked.items()]
    ev = Evidence.of(results, {i: Task(id=i, prompt=q, reference=[a])
                               for i, (q, a) in asked.items()})
    for rule in ("- Write the date in the format the question names, with two digits for a day "
                 "or month where the format has DD or MM.",
                 "- Read a date given as DD/MM/YYYY day first: 04/03/2021 is 4 March.",
                 "- When you read a date given in DD/MM/YYYY, the day comes first."):
        assert find_quote(rule, ev) is None, rule
    # The same verb with the words of what one group asks about, and a form written in.
    quote = find_quote("- Write the date 2021-05-06 as the question asks.", ev)
    assert quote is not None and quote.task_id == "w1"
    for rule in ("- Reply with a date given as DD/MM/YYYY.", "- Give every date as DD/MM/YYYY.",
                 "- Write the date in DD/MM/YYYY."):
        quote = find_quote(rule, ev)
        assert quote is not None and quote.kind == "form", rule


def _dates() -> Evidence:
    """Date questions, each naming the format its answer is to be written in."""
    asked = {"d1": ("Write the date 2021-03-04 in the format DD/MM/YYYY.", "04/03/2021"),
             "d2": ("What is the date 5 days after 12/06/2022? Give it in the format "
                    "YYYY-MM-DD.", "2022-06-17"),
             "d3": ("Write the date March 4, 2021 in the format YYYY-MM-DD.", "2021-03-04"),
             "d4": ("What is the date 3 days after 2020-01-30? Give it in the format Month D, "
                    "YYYY.", "February 2, 2020"),
             "d5": ("Write the date 09/11/2023 in the format Month D, YYYY.", "November 9, 2023"),
             "d6": ("Write the date July 1, 2024 in the format DD/MM/YYYY.", "01/07/2024")}
    results = [RolloutResult(task_id=i, messages=(Message(role="system", content="# Dates"),
                                                  Message(role="user", content=q)),
                             answer="x", hard=0.0, soft=0.0) for i, (q, _) in asked.items()]
    return Evidence.of(results, {i: Task(id=i, prompt=q, reference=[a])
                                 for i, (q, a) in asked.items()})


def test_a_form_only_some_requests_ask_for_is_not_a_rule_for_every_task() -> None:
    # Written by the 1.5B analyst from batches of date questions in three formats: the agent
    # would write every date so, and two questions in three ask for another format.
    ev = _dates()
    quote = find_quote("- Before you answer, ensure the date is formatted as DD/MM/YYYY and "
                       "include the month name.", ev)
    assert quote is not None and (quote.kind, quote.quoted, quote.task_id) == (
        "form", "dd mm yyyy", "d1")
    assert quote.reason() == (
        "makes a form that training item 'd1' asks for a rule for every task, where other tasks "
        "ask for another (say when it applies, or follow the form each task asks for): "
        "'dd mm yyyy'")
    # Accepted by the gate before this check (seed 2 of the dates set): a form no request asks
    # for beside it is no alternative, and a condition that names neither the form nor the
    # request does not say when the form applies.
    for rule in ("- Use the format DD/MM/YYYY. If the month is not specified, use the correct "
                 "format of MM/DD/YYYY.",
                 "- Before you answer, make sure the date is in the correct format (DD/MM/YYYY) "
                 "and specifies the month if not.",
                 "- Use DD/MM/YYYY, not another format.", "- Dates: DD/MM/YYYY."):
        quote = find_quote(rule, ev)
        assert quote is not None and (quote.kind, quote.quoted) == ("form", "dd mm yyyy"), rule
    quote = find_quote("Ensure that the date format is YYYY-MM-DD.", ev)
    assert quote is not None and (quote.kind, quote.quoted) == ("form", "yyyy mm dd")
    quote = find_quote("- Reply with the date as Month D, YYYY.", ev)
    assert quote is not None and (quote.kind, quote.quoted) == ("form", "month d yyyy")
    # What is kept is the form each task asks for, with the forms the requests name, and the
    # form taken out is said; so is a form copied with the request's words.
    kept = clean_text("- Before you answer, ensure that the date format is YYYY-MM-DD.", ev)
    assert kept.clean == ("- Before you answer, ensure that the date format is the format the "
                          "task asks for (DD/MM/YYYY, YYYY-MM-DD or Month D, YYYY).")
    assert [(text, q.kind) for text, q in kept.repaired] == [("YYYY-MM-DD", "form")]
    assert kept.removed == ()
    assert find_quote("- Write dates in the format YYYY-MM-DD.", ev) is not None
    kept = clean_text("- Write dates in the format YYYY-MM-DD.", ev)
    assert kept.clean == ("- Write dates in the format the task asks for (DD/MM/YYYY, "
                          "YYYY-MM-DD or Month D, YYYY).")
    # A rule that quotes a task besides is not repaired: it goes, whole.
    assert clean_text("- Write dates as YYYY-MM-DD, like 2022-06-17.", ev).clean is None
    for rule in ("- If the question asks for DD/MM/YYYY, put the day first.",
                 "- Write the date in the format the question asks for, such as YYYY-MM-DD.",
                 "- Use the format the question names (YYYY-MM-DD, DD/MM/YYYY or Month D, "
                 "YYYY), with two digits for the day and month where the format has DD and MM.",
                 "- For DD/MM/YYYY, put the day first.",
                 "- DD/MM/YYYY questions: put the day first.",
                 "- Put the day first when the question asks for DD/MM/YYYY.",
                 "- Write DD/MM/YYYY if the task says so, and count the days first.",
                 "- Write the date in the requested format, such as DD/MM/YYYY.",
                 "- Count the days one at a time, across the end of the month.",
                 "- Reply with the date only."):
        assert find_quote(rule, ev) is None, rule
    # A form the skill holds is its own; a form every request of the batch names is the task's.
    assert find_quote("- Write dates as YYYY-MM-DD.", ev,
                      "# Dates\n\n- Write dates as YYYY-MM-DD.\n") is None
    # A skill that lists the forms fixes none of them: one of them fixed later is refused.
    listing = f"# Dates\n\n{kept.clean}\n"
    quote = find_quote("- Reply with the date in 'Month D, YYYY' format.", ev, listing)
    assert quote is not None and (quote.kind, quote.quoted) == ("form", "month d yyyy")
    assert clean_text("- Reply with the date in 'Month D, YYYY' format.", ev, listing).clean == (
        "- Reply with the date in the format the task asks for (DD/MM/YYYY, YYYY-MM-DD or "
        "Month D, YYYY).")
    alike = Evidence.of([RolloutResult(task_id=f"s{i}", answer="x", hard=0.0, soft=0.0,
                                       messages=(Message(role="user", content=f"Add {i} days to "
                                                         "2020-01-01; answer in YYYY-MM-DD."),))
                         for i in range(3)])
    assert find_quote("- Write dates as YYYY-MM-DD.", alike) is None
    # Times: questions asking for HH:MM:SS or HH:MM, either fixed for all.
    times = _times()
    for rule, form in (("- Reply with the duration in HH:MM:SS.", "hh mm ss"),
                       ("- Reply in HH:MM, two digits per field.", "hh mm")):
        quote = find_quote(rule, times)
        assert quote is not None and (quote.kind, quote.quoted) == ("form", form), rule
    assert clean_text("- Reply with the duration in HH:MM:SS format.", times).clean == (
        "- Reply with the duration in the format the task asks for (HH:MM:SS or HH:MM).")
    # Screened on the times set: the form in small letters is the same form.
    quote = find_quote("- Before you answer, ensure that the time is written in the format "
                       "hh:mm.", times)
    assert quote is not None and (quote.kind, quote.quoted) == ("form", "hh mm")
    # What the sentence said before the form is worded for the format it now names: "as" and
    # "formatted as" read "in"; "a time format such as" and "the same format as" go; "such as"
    # after another word gives an example and "the same as" compares: both stay.
    for rule, clean in (
            ("- Write the time as hh:mm:ss.",
             "- Write the time in the format the task asks for (HH:MM:SS or HH:MM)."),
            ("- Make sure the time is formatted as HH:MM:SS.",
             "- Make sure the time is in the format the task asks for (HH:MM:SS or HH:MM)."),
            ("- Check that the time is formatted in HH:MM.",
             "- Check that the time is in the format the task asks for (HH:MM:SS or HH:MM)."),
            ("- As HH:MM:SS, write the duration.",
             "- In the format the task asks for (HH:MM:SS or HH:MM), write the duration."),
            ("- Use a time format such as HH:MM:SS.",
             "- Use the format the task asks for (HH:MM:SS or HH:MM)."),
            ("- Use formats such as HH:MM:SS.",
             "- Use the format the task asks for (HH:MM:SS or HH:MM)."),
            ("- Use the same format as HH:MM:SS.",
             "- Use the format the task asks for (HH:MM:SS or HH:MM)."),
            ("- Use any layout, such as HH:MM:SS.",
             "- Use any layout, such as the format the task asks for (HH:MM:SS or HH:MM)."),
            ("- Work out the time, then format it as HH:MM.",
             "- Work out the time, then write it in the format the task asks for (HH:MM:SS or "
             "HH:MM)."),
            ("- Format the duration as HH:MM:SS.",
             "- Write the duration in the format the task asks for (HH:MM:SS or HH:MM)."),
            ("- Before you answer, format as HH:MM:SS.",
             "- Before you answer, write in the format the task asks for (HH:MM:SS or HH:MM)."),
            ("- Make the reply the same as HH:MM:SS.",
             "- Make the reply the same as the format the task asks for (HH:MM:SS or HH:MM).")):
        assert clean_text(rule, times).clean == clean, rule
    # Screened on the times set as "- Use the correct the format the task asks for ...": the
    # article and the words that qualify the form go with it.
    for rule in ("- Use the correct HH:MM:SS format for the answer.",
                 "- Use the correct format HH:MM:SS for the answer."):
        assert clean_text(rule, times).clean == (
            "- Use the format the task asks for (HH:MM:SS or HH:MM) for the answer."), rule
    assert clean_text("- Reply in the HH:MM:SS format.", times).clean == (
        "- Reply in the format the task asks for (HH:MM:SS or HH:MM).")
    # Sent to the gate on the times set: "if" after a verb of checking says what to check,
    # not when the rule applies; a check the question decides is a condition still.
    assert clean_text("- Before you answer, check if the time format is 'HH:MM:SS'.",
                      times).clean == ("- Before you answer, check if the time format is the "
                                       "format the task asks for (HH:MM:SS or HH:MM).")
    assert find_quote("- Check whether the question asks for HH:MM, and if it does, leave out "
                      "the seconds.", times) is None
    assert find_quote("- When the question asks for hh:mm, leave out the seconds.", times) is None
    assert find_quote("- Write times as hh:mm or hh:mm:ss, as the task asks.", times) is None
    # Screened on the times set: a pointer to the request after the fixed form says what the
    # form is for, and fixes it all the same; one before it, or in its clause, leaves it to the
    # request.
    assert clean_text("- Before you answer, use the format HH:MM:SS for time, including minutes "
                      "and seconds, so the answer matches the requested form.", times).clean == (
        "- Before you answer, use the format the task asks for (HH:MM:SS or HH:MM) for time, "
        "including minutes and seconds, so the answer matches the requested form.")
    for rule in ("- Reply in the format the question asks for, such as HH:MM:SS.",
                 "- Reply in HH:MM:SS when the question asks for it.",
                 "- Reply in the requested format (HH:MM:SS, for example)."):
        assert find_quote(rule, times) is None, rule
    # Capitals that are not placeholders of a form: a column, a currency, a protocol word.
    sheets = Evidence.of([RolloutResult(task_id=i, answer="x", hard=0.0, soft=0.0,
                                        messages=(Message(role="user", content=q),))
                          for i, q in (("s1", "Sort the sheet by columns B, C in USD."),
                                       ("s2", "Sort the sheet by column B in EUR."),
                                       ("s3", "Reply with ACTION: sort and column C."))])
    for rule in ("- Sort by column B first.", "- Give amounts in USD.",
                 "- Write one ACTION line."):
        assert find_quote(rule, sheets) is None, rule


def test_rules_the_agent_can_follow_about_its_answer_pass() -> None:
    for rule in ("Reply with the answer only.", "Put the answer on the last line.",
                 "Give the number as the answer, without units.",
                 "Keep your answer as short as possible.",
                 "Answer with the shortest span of the passage that answers the question.",
                 "Use the format the question asks for (HH:MM or HH:MM:SS), two digits per "
                 "field.", "Use the Task tool to hand a search to a sub-agent.",
                 "Finish one task before you start the next."):
        assert find_quote(rule, Evidence()) is None, rule
    said = "# Skill\n\n- Compare your reply with the answer key the task gives.\n"
    assert find_quote("Compare your reply with the answer key the task gives, twice.",
                      Evidence(), said) is None  # the skill's own words never count
    assert find_quote("Compare your reply with the answer key the task gives, twice.",
                      Evidence()) is not None


def _kinds() -> Evidence:
    """A quickstart-like batch: six short questions of six kinds, one of them a date."""
    asked = {"k1": ("Selby's lynx is teal.", "What colour is the lynx on the logo?", "teal"),
             "k2": ("The Ambrel flows past Falwell.", "Which river flows past Falwell?",
                    "Ambrel"),
             "k3": ("Wynwick runs 3 workshops.", "How many workshops does Wynwick run?", "3"),
             "k4": ("It moved in 1914.", "In which year did the company move?", "1914"),
             "k5": ("The bridge opened on 4 May 1921.", "On what date did the bridge open?",
                    "4 May 1921"),
             "k6": ("Ilse Fenthorpe founded it.", "Who founded the company?", "Ilse Fenthorpe")}
    return Evidence.of([_result(i, c, q, "wrong") for i, (c, q, _) in asked.items()],
                       {i: Task(id=i, prompt=q, reference=[a]) for i, (_, q, a) in asked.items()})


def test_a_rule_made_of_one_questions_kind_must_say_when_it_applies() -> None:
    # Accepted by the quickstart on the 1.5B model, from the one date question of its batch:
    # the agent obeyed it on every question.
    ev = _kinds()
    quote = find_quote("- Reply with just the date, without any additional information.", ev)
    assert quote is not None and (quote.kind, quote.quoted, quote.task_id) == ("narrow", "date",
                                                                             "k5")
    assert quote.reason() == ("makes a word only the question of training item 'k5' asks about "
                              "a rule for every task (say when it applies): 'date'")
    for rule in ("- If the question asks for a date, reply with just the date.",
                 "- When a date is asked for, write it as the passage does.",
                 "- Dates: reply with the day, month and year only.",
                 "- Write a date as the passage writes it.",
                 "- Write a year as its four digits alone (1903, not 'in 1903').",
                 "- For a date, reply with the day, month and year only.",
                 "- Reply with the answer only.",
                 "- Reply with the shortest phrase from the passage that answers the question.",
                 "- Leave out any words the question already says."):
        assert find_quote(rule, ev) is None, rule
    assert find_quote("- Reply with just the date for every question.", ev) is not None
    # A word the skill already holds is its own; and a kind that half the questions ask about
    # is no one question's.
    assert find_quote("- Reply with just the date.", ev, "# Skill\n\n- Write a date as "
                      "4 May 1921.\n") is None
    dates = Evidence.of([_result(f"d{i}", "It opened on 4 May 1921.", "On what date did it "
                                 "open?", "wrong") for i in range(3)]
                        + [_result("c1", "It is teal.", "What colour is it?", "wrong")])
    assert find_quote("- Reply with just the date.", dates) is None
    # A word of one question that names what every answer is: math's one question that says
    # "number", where every answer is a number; and words that name nothing ("Before you
    # answer, make sure to read ...", where one question says "before" and one "read").
    sums = {"m1": ("Tom has 3 apples and buys 4 more. What number of apples does he have?", "7"),
            "m2": ("A box holds 12 eggs. How many eggs are in 5 boxes?", "60"),
            "m3": ("Ann reads 9 pages a day. How many pages before day 4 ends?", "36"),
            "m4": ("A bus seats 40. How many seats are in 3 buses?", "120")}
    ev = Evidence.of([_result(i, "", q, "wrong") for i, (q, _) in sums.items()],
                     {i: Task(id=i, prompt=q, reference=[a]) for i, (q, a) in sums.items()})
    for rule in ("- Give the number alone, without units.",
                 "- Before you answer, make sure to read the question twice."):
        assert find_quote(rule, ev) is None, rule


def test_a_kind_of_answer_and_a_word_after_a_noun_name_no_task() -> None:
    # Rules a careful writer gives a quickstart-like batch, refused before: "yes" was one
    # question's gold answer, and "before" (after "the question") a word one question asks.
    asked = {"y1": ("The fort stood before the river.", "Did the fort stand before the river?",
                    "yes"),
             "y2": ("Selby's lynx is teal.", "What colour is the lynx?", "teal"),
             "y3": ("Wynwick runs 3 workshops.", "How many workshops does Wynwick run?", "3"),
             "y4": ("It moved in 1914.", "In which year did the company move?", "1914"),
             "y5": ("Ilse Fenthorpe founded it.", "Who founded the company?", "Ilse Fenthorpe")}
    ev = Evidence.of([_result(i, c, q, "wrong") for i, (c, q, _) in asked.items()],
                     {i: Task(id=i, prompt=q, reference=[a]) for i, (c, q, a) in asked.items()})
    for rule in ("- For yes/no questions, reply with yes or no only.",
                 "- Check your answer against the question before you reply."):
        assert find_quote(rule, ev) is None, rule
    quote = find_quote("- Reply with 'teal' when unsure.", ev)
    assert quote is not None and quote.kind == "answer"


def test_a_value_only_one_kind_of_answer_holds_must_say_when_it_applies() -> None:
    # From the unit-conversion set (bench/format_tasks.py --kind units): the analysts made the
    # symbol of the gram questions' answers a rule for every question.
    asked = {"u1": ("Convert 5.7 kg (a bag of flour) to grams. Reply with the number and the "
                    "unit symbol.", "5700 g"),
             "u2": ("How many metres are in 38 km? Reply with the number and the unit symbol.",
                    "38000 m"),
             "u3": ("How many centimetres are in 37 m? Reply with the number only.", "3700"),
             "u4": ("Convert 0.24 min (a song) to seconds. Give the value in seconds, written "
                    "with its unit symbol.", "14.4 s"),
             "u5": ("How many millimetres are in 5.8 cm? Reply with the number and the unit "
                    "symbol.", "58 mm"),
             "u6": ("How many kilograms are in 39 t? Reply with the number only.", "39000")}
    ev = Evidence.of([_result(i, "", q, "wrong") for i, (q, _) in asked.items()],
                     {i: Task(id=i, prompt=q, reference=[a]) for i, (q, a) in asked.items()})
    skill = "# Units\n\n- End your reply with a line of the form `Answer: <your answer>`.\n"
    for rule, value, task in (
            ("- Before you answer, include the unit symbol 'g'.", "g", "u1"),
            ("- Reply with 'Answer: <your answer>' and end with the unit symbol 'mm'", "mm",
             "u5")):
        quote = find_quote(rule, ev, skill)
        assert quote is not None and (quote.kind, quote.quoted, quote.task_id) == (
            "value", value, task), rule
    assert find_quote("- Before you answer, include the unit symbol 'g'.", ev, skill).reason() \
        == ("makes a value only the answers of training item 'u1' and its kind hold a rule for "
            "every task (say when it applies): 'g'")
    for rule in ("- If the question asks for grams, write 'g' after the number.",
                 "- Use the unit symbol 'g' for grams.",
                 "- Grams: write 'g' after the number.",
                 "- Write units as their symbols, such as 'g' or 'mm', not as words.",
                 "- Write units as their symbols (e.g. 'mm'), not as words.",
                 "- Write units as their symbols, not as words.",
                 "- Reply with 'min' after the number.",  # a question names it: not answers'
                 "- End your reply with 'Answer: <your answer>'."):
        assert find_quote(rule, ev, skill) is None, rule
    # Half the answers hold it: a value of the batch, not of one kind.
    metres = Evidence.of([_result(f"m{i}", "", f"How many metres are in {i} km?", "wrong")
                          for i in range(1, 5)],
                         {f"m{i}": Task(id=f"m{i}", prompt="", reference=[f"{i}000 m"])
                          for i in range(1, 5)})
    assert find_quote("- Write 'm' after the number.", metres) is None
    # A value set in brackets is a value too, and a condition that names no kind of task ("if
    # you know it") does not say when it applies (the units run's accepted clause).
    for rule in ("- Use the unit symbol (mm) in your reply if you know it.",
                 "- End your reply with the unit symbol (mm) when possible."):
        quote = find_quote(rule, ev, skill)
        assert quote is not None and (quote.kind, quote.quoted) == ("value", "mm"), rule
    for rule in ("- Use the unit symbol (mm) when the question asks for millimetres.",
                 "- Write units as their symbols (e.g. mm), not as words.",
                 "- Use the unit symbol (if any) that the question names."):
        assert find_quote(rule, ev, skill) is None, rule


# ----------------------------------------------------------------------------- in training

LEAK_FEEDBACK = ("Rule year: it contains the gold answer plus extra words, and scoring is exact "
                 "match, so only the answer alone counts.")


def _leaky(skill: str, tasks: str, prompt: str) -> dict[str, Any]:
    """Proposes a gold answer it saw, the scorer's words, and (last) the rule that works."""
    if toy.rule("year") in skill:
        return {"reasoning": "done", "edits": []}
    gold = re.search(r"year: (\d{4})", tasks)
    if gold is None:
        return {"reasoning": "no year failures here", "edits": []}
    return {"reasoning": "years carry extra words", "edits": [
        {"op": "append", "content": f"Rule year: the year is {gold.group(1)}.", "support": 9},
        {"op": "append", "content": LEAK_FEEDBACK, "support": 8},
        {"op": "append", "content": toy.rule("year"), "support": 1}]}


leaky_optimizer = scripted_optimizer(_leaky)


def _noop(skill: str, tasks: str, prompt: str) -> dict[str, Any]:
    """Ranks first a replace that changes nothing, then the rule that works."""
    if toy.rule("year") in skill or "year" not in tasks:
        return {"reasoning": "done", "edits": []}
    line = "Answer the question about the item."
    return {"reasoning": "years", "edits": [
        {"op": "replace", "anchor": line, "content": line, "support": 9},
        {"op": "append", "content": toy.rule("year"), "support": 1}]}


noop_optimizer = scripted_optimizer(_noop)


def _config(folder: Path, optimizer: str) -> Path:
    return toy_config(folder, f"test_hygiene:{optimizer}",
                      train={"num_epochs": 1, "steps_per_epoch": 2})


def test_leaking_edits_are_refused_before_rollout_and_the_clean_one_is_learned(
        toy_dir: Path) -> None:
    out = toy_dir / "run"
    build_trainer(load_config(_config(toy_dir, "leaky_optimizer")), out).fit()
    step = out / "steps" / "e01-s001"
    report = json.loads((step / "apply_report.json").read_text())["outcomes"]
    refused = [o["reason"] for o in report if o["status"] == "refused"]
    gold = [r for r in refused
            if re.search(r"quotes the gold answer of training item 't\d+': '\d{4}'", r)]
    feedback = [r for r in refused if "copies the scorer's feedback" in r]
    assert gold and feedback and len(gold) + len(feedback) == len(refused)
    # A refused rule the analyst wrote again when asked once more is reported once.
    texts = [o["edit"]["content"] for o in report if o["status"] == "refused"]
    assert len(texts) == len(set(texts))
    # Each analyst whose reply was refused in part was asked once more, told why.
    first = read_jsonl(step / "calls.jsonl")
    again = [c["request"]["messages"] for c in first if c["request"]["kind"] == "analyst_failure"
             and len(c["request"]["messages"]) == 3]
    assert again and all("refused" not in m[2]["content"] and "cannot go into the skill"
                         in m[2]["content"] and "'1" in m[2]["content"] for m in again)
    # The budget (one edit) went to the clean rule, which was then learned.
    assert [o["edit"]["content"] for o in report if o["status"] == "applied"] == [
        toy.rule("year")]
    best = (out / "best_skill.md").read_text()
    assert toy.rule("year") in best and "scoring is exact match" not in best
    record = json.loads((step / "record.json").read_text())
    assert record["n_refused"] == len(refused) and record["decision"] == "accept_new_best"
    # Later optimizer calls are told what was refused and why.
    calls = read_jsonl(out / "steps" / "e01-s002" / "calls.jsonl")
    analyst = [c for c in calls if c["request"]["kind"] == "analyst_failure"]
    assert analyst and all("refused before rollout" in c["request"]["messages"][0]["content"]
                           for c in analyst)


def test_an_edit_that_changes_nothing_gives_its_place_to_the_next(toy_dir: Path) -> None:
    out = toy_dir / "run"
    build_trainer(load_config(_config(toy_dir, "noop_optimizer")), out).fit()
    step = out / "steps" / "e01-s001"
    report = json.loads((step / "apply_report.json").read_text())["outcomes"]
    assert [o["status"] for o in report] == ["skipped", "applied"]
    assert "no change" in report[0]["reason"]
    # The analyst was first asked once more, told that its edit changes nothing.
    calls = read_jsonl(step / "calls.jsonl")
    assert any(len(c["request"]["messages"]) == 3 and "changes nothing in the skill"
               in c["request"]["messages"][2]["content"] for c in calls)
    record = json.loads((step / "record.json").read_text())
    assert record["decision"] == "accept_new_best"
    assert toy.rule("year") in (out / "best_skill.md").read_text()


def test_a_rule_about_the_agent_in_the_third_person_is_refused() -> None:
    """WebShop's analyst wrote "If the agent does not open an item, say 'Before you answer,
    open the item.'": the coach's view of the agent, not a line the agent reads as its own."""
    from skillgrad.stages.hygiene import unseen_quote

    quote = unseen_quote("If the agent does not open an item, say 'Before you answer, open the "
                         "item.'")
    assert quote is not None and quote.kind == "about"
    assert quote.reason() == "speaks about the agent instead of to it: 'If the agent'"
    assert unseen_quote("The agent should search first.") is not None
    # Screened on a time-arithmetic set: the prompt's "The agent never sees an expected
    # answer." written back as a line of the skill.
    quote = unseen_quote("- The agent never sees the answer.")
    assert quote is not None and (quote.kind, quote.quoted) == ("about", "The agent never")
    # The quickstart's screen: "If the agent's reply contains more words, remove them."
    quote = unseen_quote("If the agent's reply contains more words, remove the extra words.")
    assert quote is not None and (quote.kind, quote.quoted) == ("about", "If the agent's reply")
    # The quickstart's analyst, after "... contains the exact the answer ..." was refused.
    quote = unseen_quote("Keep the agent's reply to the point.")
    assert quote is not None and (quote.kind, quote.quoted) == ("about", "the agent's reply")
    quote = unseen_quote("Ensure the agent's reply contains the exact answer or a shortened "
                         "version of it.")
    assert quote is not None and (quote.kind, quote.quoted) == (
        "unseen", "the agent's reply contains the exact answer")
    # Screened on a time-arithmetic set: the third person with a verb of its own, and the
    # coach's wish for the agent.
    for said, quoted in (("- Ensure that the agent follows the correct format (HH:MM:SS).",
                          "Ensure that the agent"),
                         ("- The agent follows the format the task asks for.",
                          "The agent follows"),
                         ("- Make sure the assistant writes two digits.",
                          "Make sure the assistant")):
        quote = unseen_quote(said)
        assert quote is not None and (quote.kind, quote.quoted) == ("about", quoted), said
    for fine in ("Open an item before you buy.", "If you did not open an item, open one.",
                 "You are an agent that shops; open the first matching item.",
                 "Use the agent tool to read a file.",
                 "Reply 'Yes' or 'No' as the answer.", "Write the answer as 'Yes' or 'No'.",
                 "Give the 'short' form of a name the passage writes.",
                 "Reply with the exact answer only.",
                 "Name the agent that sees the file.", "Leave out what is not in the passage.",
                 "Add the unit the question asks for if it is not in your reply.",
                 "Make sure the last line matches the answer you worked out.",
                 "Make sure your reply matches the format of the answer you worked out.",
                 "Follow the form of the answer the question asks for.",
                 "Make sure your reply matches the form the question asks for.",
                 "Keep the unit given in the answer you worked out.",
                 "Use the numbers given in the question.",
                 "Make sure the units match the question."):
        assert unseen_quote(fine) is None, fine


def test_one_name_of_one_task_set_in_quotes_is_that_tasks() -> None:
    """The reading example screened "- Before you answer, make sure the answer starts with
    'rotterdam'", the city of two of its six questions' passage: one name, but written as the
    value to give. A name in the text without quotes needs a second one of the same task."""
    asked = {"r1": ("The port of Rotterdam is the largest in Europe.", "Which port is largest?",
                    "Rotterdam", "the port of Rotterdam"),
             "r2": ("In 1940 the centre of Rotterdam was bombed.", "What was bombed?",
                    "Rotterdam", "the centre"),
             "o1": ("The city of Oxford has a university.", "What does the city have?", "Oxford",
                    "a university"),
             "m1": ("The mill paid for its new wheel.", "What did the mill buy?", "Mill",
                    "a new wheel")}
    results = [_result(i, passage, question, "wrong") for i, (passage, question, _, _)
               in asked.items()]
    tasks = {i: Task(id=i, prompt="", reference=[answer], group=group)
             for i, (_, _, group, answer) in asked.items()}
    ev = Evidence.of(results, tasks)
    quote = find_quote("- Before you answer, make sure the answer starts with 'rotterdam'", ev)
    assert quote is not None and (quote.kind, quote.quoted) == ("names", "rotterdam")
    assert quote.task_id in {"r1", "r2"}
    assert find_quote("- Make sure the reply names \u2018Oxford\u2019.", ev) is not None
    for fine in ("- Say where Rotterdam is only when asked.",  # one name, not quoted
                 "- Don't write the passage's title.",  # apostrophes open no quote
                 "- End with 'Answer: <your answer>'."):
        assert find_quote(fine, ev) is None, fine


def test_a_word_one_request_sets_in_quotes_is_that_tasks() -> None:
    """A letter-counting set's analyst wrote "- Reply with the correct number of letters in the
    word 'grammar'.", the word one of the step's six questions sets in quotes: what that task is
    about, though written in small letters. A letter every question names is no task's."""
    asked = {"g": "How many letters does the word 'grammar' have?",
             "k": "How many vowels (a, e, i, o, u) are in the word 'kangaroo'?",
             "v": "How many times does the letter 'u' appear in the word 'vacuum'?",
             "b": "How many times does the letter 'e' appear in the word 'beginning'?",
             "s": "How many vowels (a, e, i, o, u) are in the word 'sheep'?",
             "c": "How many letters does the word 'coffee' have?"}
    ev = Evidence.of([_result(i, "", question, "2") for i, question in asked.items()],
                     {i: Task(id=i, prompt="", reference=["3"]) for i in asked})
    quote = find_quote("- Reply with the correct number of letters in the word 'grammar'.", ev)
    assert quote is not None and (quote.kind, quote.quoted, quote.task_id) == (
        "names", "grammar", "g")
    quote = find_quote("- Reply with the number of vowels in the word 'kangaroo', including "
                       "'u'.", ev)
    assert quote is not None and (quote.kind, quote.task_id) == ("names", "k")
    # ... also where it is quoted inside a quote of the question.
    quote = find_quote("- Reply with the number of vowels, not of letters, when answering 'Is "
                       "it 'sheep'?", ev)
    assert quote is not None and (quote.kind, quote.quoted, quote.task_id) == (
        "names", "sheep", "s")
    for fine in ("- Count the letter 'e' as a vowel.",  # named in every vowel question
                 "- Spell the word out one letter per line, then count.",
                 "- End with 'Answer: <your answer>'."):
        assert find_quote(fine, ev) is None, fine


def test_three_words_only_one_task_s_input_holds_are_that_task_s() -> None:
    """A doc_qa analyst wrote "... the location the customer went to while researching
    wheatgrass juicers ...": shorter than an instance run, but two of its words are in one
    question of the step and in no other."""
    def result(task_id: str, question: str) -> RolloutResult:
        return RolloutResult(task_id=task_id, answer="x", hard=0.0, soft=0.0, messages=(
            Message(role="system", content="skill"),
            Message(role="user", content=f"Question: {question}")))

    evidence = Evidence.of([
        result("a", "The customer says he went into what state while researching wheatgrass "
                    "juicers?"),
        result("b", "What product are they reviewing?"),
        result("c", "How much must one pay for a passport?"),
        result("d", "What revenue growth does management expect?")])
    quote = find_quote("Before you answer, recall where the customer went while researching "
                       "wheatgrass juicers.", evidence)
    assert quote is not None and quote.kind == "instance" and quote.task_id == "a"
    assert "researching wheatgrass" in quote.quoted
    assert find_quote("Before you answer, search with the names the question gives.",
                      evidence) is None


def _asked_twice(first: dict[str, Any], second: dict[str, Any], reply: str, reference: str,
                 max_edits: int, skill: str = "# Skill\n\nAnswer.\n") -> tuple[Any, Any]:
    """One rules analyst over one failed task, scripted to reply ``first`` and, asked again,
    ``second``: its patch and the scripted model (which holds the calls)."""
    return _analysed([json.dumps(first), json.dumps(second)], reply, reference, max_edits, skill)


def _analysed(replies: list[str], reply: str, reference: str, max_edits: int,
              skill: str) -> tuple[Any, Any]:
    """One rules analyst over one failed task, scripted to give ``replies`` in turn."""
    from skillgrad.models.scripted import ScriptedModel
    from skillgrad.stages.reflect import ReflectSettings, analyse

    model = ScriptedModel(replies)
    failed = [RolloutResult(task_id="t1", answer=reply, hard=0.0, soft=0.0, reason="wrong",
                            messages=(Message(role="system", content="S"),
                                      Message(role="user", content="Question: which?"),
                                      Message(role="assistant", content=reply)))]
    patch = analyse("failure", failed, skill, model,
                    ReflectSettings(form="rules", max_edits=max_edits), "", 0,
                    tasks={"t1": Task(id="t1", prompt="which?", reference=reference)})
    return patch, model


def test_a_clean_rule_survives_its_analyst_being_asked_again() -> None:
    """doc_qa's analyst wrote "Before you answer, search the documents ..." beside a rule
    about "the gold answer"; asked again about the refused one, it wrote other rules, and the
    clean rule was lost. What passed is kept, and the analyst is told so."""
    first = {"difference": "it never searched", "rules": [
        "Before you answer, search the documents for the relevant information.",
        "If the answer does not match the gold answer, leave out the extra words."]}
    second = {"difference": "extra words", "rules": [
        "Reply with the value alone.",
        "Before you answer, search the documents for the relevant information."]}
    patch, model = _asked_twice(first, second, "ANSWER: New York", "Newark", max_edits=2)
    assert [e.content for e in patch.edits] == [
        "- Before you answer, search the documents for the relevant information.",
        "- Reply with the value alone."]
    assert [r.item.content for r in patch.refused] == [
        "- If the answer does not match the gold answer, leave out the extra words."]
    asked = model.calls[1].messages[-1].text()
    assert asked.startswith("Kept (no need to write them again):\n- '- Before you answer, "
                            "search the documents")


def test_a_rule_restating_a_kept_one_is_left_out_and_said() -> None:
    """The quickstart's analyst, asked again about refused rules, wrote "... remove them."
    beside the kept "... leave them out.", and both went into the skill. The restatement is
    left out, and the patch says so; a rule that adds a condition to a kept one is not a
    restatement."""
    first = {"difference": "extra words", "rules": [
        "If the reply contains additional words, leave them out.",
        "If the reply is longer than the answer, remove the excess words."]}
    second = {"difference": "extra words", "rules": [
        "If the reply contains additional words, remove them.",
        "If the reply contains additional words and the question asks for a year, give the "
        "four digits alone."]}
    patch, _ = _asked_twice(first, second, "It was 1902.", "1902", max_edits=3)
    assert [e.content for e in patch.edits] == [
        "- If the reply contains additional words, leave them out.",
        "- If the reply contains additional words and the question asks for a year, give the "
        "four digits alone."]
    assert patch.restated == ("'- If the reply contains additional words, remove them.' "
                              "restates the kept '- If the reply contains additional words, "
                              "leave them out.'; left out",)


SHOP = """# Shopping

1. On the search page, search with the product type and its key attributes, in a few words
   taken from the instruction (no price, no filler words).
2. On the results page, open the first item whose title names that kind of product and whose
   price is under the limit, by clicking its product id.
"""


def test_a_rule_the_skill_already_says_is_left_out_and_said() -> None:
    """WebShop's analyst, told the agent never opened an item, wrote "Before you answer, open
    the first item whose title names that kind of product ..." and "Search with the product
    type and its key attributes": the skill's own steps again, which the screen then rolled
    out for nothing. Each is left out, the analyst is asked again and told why, and the patch
    says what each restated."""
    first = {"difference": "it never opened an item", "rules": [
        "Before you answer, open the first item whose title names that kind of product and "
        "whose price is under the limit",
        "Search with the product type and its key attributes"]}
    second = {"difference": "it pressed Next", "rules": [
        "On the results page, reply click[ID] with an item's product id, never Next >.",
        "Open the first item whose title names that kind of product."]}
    patch, model = _asked_twice(first, second, "[Next >]", "B01", max_edits=2, skill=SHOP)
    assert [e.content for e in patch.edits] == [
        "- On the results page, reply click[ID] with an item's product id, never Next >."]
    told = model.calls[1].messages[-1].text()
    assert ("changes nothing in the skill (the skill already says it: 'search with the "
            "product type and its key attributes')") in told
    assert len(patch.restated) == 3 and all("restates the skill's" in r for r in patch.restated)
    assert patch.restated[2].startswith("'- Open the first item whose title names that kind")


def test_a_rule_that_says_the_opposite_of_the_skill_is_left_out_and_said() -> None:
    """The quickstart's analyst, with "- Remove any extra words from the reply." in the skill,
    proposed "- Do not remove any extra words from the reply.": appended, the skill would say
    both. It is left out like a restatement, the analyst is told that a skill must not say
    both, and the patch says what it contradicted; a rule that adds a condition goes on."""
    skill = "# Answers\n\n- Remove any extra words from the reply.\n"
    first = {"difference": "extra words", "rules": [
        "Do not remove any extra words from the reply.",
        "When the question asks for a unit, keep the unit after the number."]}
    second = {"difference": "extra words", "rules": [
        "Never remove extra words from the reply.",
        "Reply with the number first."]}
    patch, model = _asked_twice(first, second, "It was 12 km.", "12 km", max_edits=3,
                                skill=skill)
    assert [e.content for e in patch.edits] == [
        "- When the question asks for a unit, keep the unit after the number.",
        "- Reply with the number first."]
    told = model.calls[1].messages[-1].text()
    assert ("'- Do not remove any extra words from the reply.': the skill says the opposite: "
            "'Remove any extra words from the reply.', and a skill must not say both") in told
    assert patch.restated == (
        "'- Do not remove any extra words from the reply.' contradicts the skill's 'Remove any "
        "extra words from the reply.'; left out",
        "'- Never remove extra words from the reply.' contradicts the skill's 'Remove any extra "
        "words from the reply.'; left out")
    # The step line counts each kind of left-out rule apart.
    from skillgrad.stages.candidate import Proposal

    restating = "'- Reply.' restates the kept '- Reply now.'; left out"
    assert Proposal(skill, restated=(*patch.restated, restating)).losses() == (
        "analysts: 1 restating a kept rule or the skill and 2 contradicting the skill left out",)


def test_a_rule_against_the_skill_stays_out_when_the_second_reply_is_unusable() -> None:
    """Asked again, a small model may write no JSON at all; the first reply's rules are then
    used, less the one that says the opposite of the skill, and the patch still says why."""
    skill = "# Answers\n\n- Remove any extra words from the reply.\n"
    first = {"difference": "extra words", "rules": [
        "Do not remove any extra words from the reply.", "Reply with the number first."]}
    patch, model = _analysed([json.dumps(first), "no JSON here", "still none"], "It was 12.",
                             "12", max_edits=3, skill=skill)
    assert model.n_calls == 3  # the first reply, then the one asked again and its retry
    assert [e.content for e in patch.edits] == ["- Reply with the number first."]
    assert patch.restated == (
        "'- Do not remove any extra words from the reply.' contradicts the skill's 'Remove any "
        "extra words from the reply.'; left out",)


def test_a_rule_with_a_negation_or_few_words_is_not_the_skill_again() -> None:
    from skillgrad.stages.restated import contradicted_part, restated_part, skill_parts

    assert skill_parts(SHOP)[1].startswith("On the results page, open the first item") and \
        skill_parts(SHOP)[1].endswith("by clicking its product id.")
    assert restated_part("Open the first item whose price is under the limit.", SHOP) == \
        skill_parts(SHOP)[1]
    assert restated_part("Never open the first item whose price is under the limit.",
                         SHOP) is None
    assert contradicted_part("Never open the first item whose price is under the limit.",
                             SHOP) == skill_parts(SHOP)[1]
    assert contradicted_part("Open the first item whose price is under the limit.", SHOP) is None
    assert contradicted_part("Don't search with the product type and its key attributes.",
                             SHOP) == "search with the product type and its key attributes"
    # An exception (a condition the part lacks) is not the opposite; the skill's own negation
    # ("no price") said again is a restatement.
    assert contradicted_part("When the instruction names a brand, do not search with the "
                             "product type alone.", SHOP) is None
    assert restated_part("Open an item.", SHOP) is None  # two content words
    assert restated_part("Search with the product type and its key attributes.", SHOP) == \
        "search with the product type and its key attributes"  # a clause of a sentence
    assert restated_part("Open the first item and check its reviews.", SHOP) is None
    # The skill's two steps written back as one rule; one new sentence makes it a rule.
    both = ("Search with the product type and its key attributes. Open the first item whose "
            "price is under the limit.")
    assert restated_part(both, SHOP) == ("search with the product type and its key attributes; "
                                         + skill_parts(SHOP)[1])
    assert restated_part(both + " Check the reviews of that item first.", SHOP) is None


def test_a_negated_condition_is_the_skills_otherwise_not_its_opposite() -> None:
    """A dates analyst wrote "If the context is not given, rely on what you know.", which the
    skill's "...; otherwise rely on what you know." already says; it was reported as saying the
    opposite, the "not" in its condition read as negating what it asks for."""
    from skillgrad.records import Edit
    from skillgrad.stages.restated import against_skill

    skill = ("# Answering questions\n\n- Use the context when one is given; otherwise rely on "
             "what you know.\n- Remove any extra words from the reply.\n")

    def verb(rule: str) -> str | None:
        found = against_skill(Edit(op="append", content=rule), skill)
        return None if found is None else found[1].split("' ")[-1].split(" ")[0]

    assert verb("- If the context is not given, rely on what you know.") == "restates"
    assert verb("- Before you answer, if no context is given, rely on what you know.") == \
        "restates"
    # A negation in what the rule asks for is the opposite still.
    assert verb("- Do not use the context when one is given.") == "contradicts"
    assert verb("- If the context is not given, do not rely on what you know.") == "contradicts"
    # Beside a part with no "otherwise", a negated condition reads as a negation, as before.
    skill = "# Answering questions\n\n- Use the context when one is given, and rely on what you know.\n"
    assert verb("- If the context is not given, rely on what you know.") == "contradicts"


def test_two_lines_of_the_skill_joined_by_a_semicolon_are_the_skill_again() -> None:
    """An analyst of a unit-conversion set wrote the question-answering skill's three lines back
    as one rule, the first two joined into one sentence at ";"."""
    from skillgrad.stages.restated import restated_part

    skill = ("# Answering questions\n\n- Read the question and the context carefully before "
             "answering.\n- Use the context when one is given; otherwise rely on what you "
             "know.\n- End your reply with a line of the form `Answer: <your answer>`.\n")
    joined = ("- Read the question and the context carefully before answering; Use the context "
              "when one is given; otherwise rely on what you know. End your reply with a line "
              "of the form 'Answer: <your answer>'.")
    said = restated_part(joined, skill)
    assert said is not None and said.startswith("Read the question and the context")
    assert "End your reply" in said
    assert restated_part("Read the question and the context carefully before answering; use "
                         "the context.", skill) is not None  # a few of a line's words
    # A clause of its own makes it a rule.
    assert restated_part("Read the question and the context carefully before answering; write "
                         "the unit as its symbol.", skill) is None
    assert restated_part("Read the question carefully; never use the context.", skill) is None
    # Two lines joined by "and" in one clause, seen on a letter-counting set: most of each.
    said = restated_part("- Before you answer, read the question and the context carefully and "
                         "end your reply with 'Answer: <your answer>'. Use the context when one "
                         "is given; otherwise rely on what you know.", skill)
    assert said is not None and said.count("; ") == 3  # the three lines, one with its own ";"
    # A few of two lines' words in one clause are no restatement of either.
    assert restated_part("Read the reply and end the context.", skill) is None
    # A run of one line's words says nothing it does not, however few: a letter-counting
    # analyst's "- Answer: <your answer>" went to the gate. Not without the line's negation.
    assert restated_part("- Answer: <your answer>", skill) == (
        "End your reply with a line of the form `Answer: <your answer>`.")
    assert restated_part("- Never use the context.", skill) is None
    assert restated_part("- Answer the question.", skill) is None
    # The same words in another person or number: a letter-counting analyst's "what it knows"
    # is the skill's "what you know", and "replies" its "reply".
    assert restated_part("- Use the context when one is given; otherwise rely on what it "
                         "knows.", skill) == (
        "Use the context when one is given; otherwise rely on what you know.")
    assert restated_part("- End your replies with lines of the form 'Answer: <your answer>'.",
                         skill) == (
        "End your reply with a line of the form `Answer: <your answer>`.")
    assert restated_part("- Use the context when one is given; otherwise rely on what it "
                         "knows of metric units.", skill) is None  # says more


def test_a_stem_drops_a_plurals_or_a_third_persons_s_only() -> None:
    from skillgrad.words import stem, stems

    assert [stem(w) for w in ("knows", "answers", "replies", "lines", "uses")] == [
        "know", "answer", "reply", "line", "use"]
    # Short words and endings that are no plural's are kept.
    assert [stem(w) for w in ("yes", "has", "class", "focus", "analysis", "know")] == [
        "yes", "has", "class", "focus", "analysis", "know"]
    assert stems("The agent knows the answers.") == {"agent", "know", "answer"}


def test_a_number_with_the_word_after_it_as_one_task_has_them_is_that_tasks() -> None:
    """A unit-conversion analyst wrote two questions of its batch into rules, a one-digit number
    and its unit each; the gate nearly accepted them (7 better, 2 worse, p = 0.054)."""
    asked = {"unit-023": "Convert 6 km (a running track) to metres. Give the value in metres, "
                         "written with its unit symbol.",
             "unit-084": "How many kilograms are in 5 t? Reply with the number only.",
             "unit-083": "A screw measures 2.6 cm. How much is that in millimetres? Reply with "
                         "the number only.",
             "unit-046": "How many metres are in 1.55 km? Reply with the number only."}
    ev = Evidence.of([_result(i, "", q, "wrong") for i, q in asked.items()])
    for rule, quoted, task in (
            ("- Reply with the exact number of kilograms in 5 t.", "5 t", "unit-084"),
            ("- Convert 6 km to metres by multiplying the number by 1000.", "6 km", "unit-023")):
        quote = find_quote(rule, ev)
        assert quote is not None and (quote.kind, quote.quoted, quote.task_id) == (
            "instance", quoted, task), rule
    for rule in ("- Convert kilometres to metres by multiplying the number by 1000.",
                 "- Write 2 digits after the point.",  # no task has "2 digits"
                 "- Reply with the number only."):
        assert find_quote(rule, ev) is None, rule


def test_a_word_count_the_analysis_shows_is_no_rule() -> None:
    """Adopted on the quickstart once: "- Before you answer, make sure that your reply only
    contains 4 words as instructed by the skill. Reply with only those words.", where the
    analysis had shown a reply "plus 4 more words" than its answer."""
    asked = {"q1": ("Who is the mayor of Dormere?", "The mayor of Dormere is Delia Grimford",
                    "Delia Grimford"),
             "q2": ("Is Dormere on the Falcrest River?", "Yes, Dormere is on the Falcrest River",
                    "yes"),
             "q3": ("How many crew does the Plover carry?", "The Plover carries a crew of 45",
                    "45")}
    results = [RolloutResult(task_id=i, answer=reply, hard=0.0, soft=0.0, reason="wrong",
                             messages=(Message(role="system", content="# Reading"),
                                       Message(role="user", content=q),
                                       Message(role="assistant", content=reply)))
               for i, (q, reply, _) in asked.items()]
    ev = Evidence.of(results, {i: Task(id=i, prompt=q, reference=[a])
                               for i, (q, _, a) in asked.items()})
    assert ev.counted == {"5", "6"}  # "plus 5 more words", "plus 6 more words"
    cleaned = clean_text("- Before you answer, make sure that your reply only contains 5 words "
                         "as instructed by the skill. Reply with only those words.", ev)
    assert cleaned.clean is None  # the sentence that points back to it goes with it
    assert [q.reason() for _, q in cleaned.removed] == [
        "echoes skillgrad's failure analysis: '5 words'"]
    cleaned = clean_text("- Make sure that your reply only contains 5 words. Reply with the "
                         "answer alone, without a sentence around it.", ev)
    assert cleaned.clean == "- Reply with the answer alone, without a sentence around it."
    # "them" is the additional words of its own sentence: the quickstart's line, kept so.
    cleaned = clean_text("- Make sure that your reply only contains 5 words. If the reply "
                         "contains additional words, leave them out.", ev)
    assert cleaned.clean == "- If the reply contains additional words, leave them out."
    # Nor does one that begins by pointing back ("This should ..."), seen after a units
    # analyst's sentence about "the agent"; one that only begins "Instead," stands alone.
    assert clean_text("- Make sure that your reply only contains 5 words. This keeps the "
                      "reply short in every case.", ev).clean is None
    assert clean_text("- Make sure that your reply only contains 5 words. Instead, reply with "
                      "the answer alone.", ev).clean == "- Reply with the answer alone."
    # ... but not one that points back after it: a letter-counting analyst's "The agent should
    # not mention all the vowels in the word. Instead, it should use 'a', 'e', 'i', 'o', 'u'."
    # used to leave "- It should use 'a', 'e', 'i', 'o', 'u'." as a rule.
    assert clean_text("- Make sure that your reply only contains 5 words. Instead, it should "
                      "say the answer alone.", ev).clean is None
    for fine in ("- Reply in at most 5 words.", "- Keep the reply to 6 words or fewer.",
                 "- Reply in 4 words.", "- Reply with the answer only."):
        assert find_quote(fine, ev) is None, fine


def test_a_rule_that_writes_a_refusals_reason_back_copies_skillgrads_own_words() -> None:
    """Told why its rule was refused, a unit-conversion analyst wrote the reason into its next
    rule, the training item's id with it; the screen rolled it out."""
    ev = Evidence.of([_result("unit-050", "", "Convert 5.7 kg to grams.", "wrong"),
                      _result("unit-010", "", "How many seconds are in 0.24 min?", "wrong")])
    echoed = ("- End the reply with Answer: <your answer>' without making any value only the "
              "answers of training item 'unit-050' and its kind hold a rule for every task (say "
              "when it applies): 'g' or 's'.")
    quote = find_quote(echoed, ev)
    assert quote is not None and quote.kind == "instructions", quote
    assert find_quote("- Say when a rule applies: for grams, write 'g'.", ev) is None


QA_SKILL = ("# Answering questions\n\n- Read the question and the context carefully before "
            "answering.\n- Use the context when one is given; otherwise rely on what you "
            "know.\n- End your reply with a line of the form `Answer: <your answer>`.\n")
# The rule the gate of a unit-conversion run accepted: the skill's three lines again, joined,
# with one clause of the analyst's own among them.
JOINED_WITH_ONE_CLAUSE = (
    "- Before you answer, read the question and the context carefully and use the context when "
    "one is given; otherwise rely on what you know; use the unit symbol (mm) in your reply if "
    "you know it; end your reply with a line of the form 'Answer: <your answer>'.")


def test_a_rule_that_says_the_skill_again_beside_a_clause_of_its_own_is_cut_to_it() -> None:
    from skillgrad.stages.restated import own_clauses, restated_part

    assert restated_part(JOINED_WITH_ONE_CLAUSE, QA_SKILL) is None  # it says more
    rest, said = own_clauses(JOINED_WITH_ONE_CLAUSE, QA_SKILL)
    assert rest == "- Use the unit symbol (mm) in your reply if you know it."
    assert said == ("Read the question and the context carefully before answering.; Use the "
                    "context when one is given; otherwise rely on what you know.; End your "
                    "reply with a line of the form `Answer: <your answer>`.")
    # Clauses joined by commas are steps whose order may be what the rule adds: not cut, but
    # left out whole where every clause is the skill again.
    assert own_clauses("- Before you answer, read the question and the context carefully before "
                       "answering, use the appropriate unit for the answer, end your reply with "
                       "a line of the form `Answer: <your answer>`.", QA_SKILL) is None
    assert restated_part("- Read the question and the context carefully before answering, use "
                         "the context when one is given, and end the reply with a",
                         QA_SKILL) is not None
    # A condition stays with what it conditions, and so does a short lead-in.
    for rule in ("- When one is given, quote the context's words exactly.",
                 "- For example, for seconds, include the unit 's' after the number.",
                 "- If the context is given, read it carefully, and reply with its exact words."):
        assert own_clauses(rule, QA_SKILL) is None, rule
    # Sentence by sentence, and a lead word the cut leaves first is dropped.
    assert own_clauses("- Read the question and the context carefully. Also, write every time "
                       "with two digits per field.", QA_SKILL)[0] == (
        "- Write every time with two digits per field.")
    # ... but one that leans on the sentence cut keeps it: a letter-counting run screened
    # "- It should use what it knows to answer ...", left of "... use the context when one is
    # given. Then, it should use what it knows to answer the question, and end its reply ...".
    for rule in ("- Read the question and the context carefully before answering and use the "
                 "context when one is given. Then, it should use what it knows to answer the "
                 "question.", "- Read the question and the context carefully. It helps to "
                 "spell each word out letter by letter.",
                 "- Use the context when one is given; otherwise rely on what it knows."):
        assert own_clauses(rule, QA_SKILL) is None, rule
    # Nothing to cut: a rule all its own, one that is all the skill again (left out whole
    # elsewhere), one whose own part is under three words.
    for rule in ("- Write every time with two digits per field; give seconds when asked.",
                 "- Read the question and the context carefully before answering; use the "
                 "context.",
                 "- Read the question and the context carefully; be brief."):
        assert own_clauses(rule, QA_SKILL) is None, rule


def test_an_analysts_rule_cut_to_its_own_clause_is_reported_and_checked_again() -> None:
    """The cut rule goes on alone, and is checked on its own: here its bracketed value, which
    only one training answer holds, under a condition that names nothing, is refused."""
    from skillgrad.models.scripted import ScriptedModel
    from skillgrad.stages.candidate import Proposal
    from skillgrad.stages.reflect import ReflectSettings, analyse
    from skillgrad.stages.restated import CUT_TO

    clean = {"difference": "units", "rules": [
        "Read the question and the context carefully; write each unit as its symbol."]}
    patch, _ = _analysed([json.dumps(clean)], "5.8 cm", "58 mm", 1, QA_SKILL)
    assert [e.content for e in patch.edits] == ["- Write each unit as its symbol."]
    assert len(patch.restated) == 1 and f" {CUT_TO} " in patch.restated[0]
    assert "'- Write each unit as its symbol.'" in patch.restated[0]
    losses = Proposal(candidate=QA_SKILL, restated=patch.restated).losses()
    assert losses == ("analysts: 1 cut to the clauses the skill lacks",)

    asked = {f"u{i}": (q, a) for i, (q, a) in enumerate((
        ("How many millimetres are in 5.8 cm? Reply with the number and the unit symbol.",
         "58 mm"),
        ("How many metres are in 38 km? Reply with the number and the unit symbol.", "38000 m"),
        ("How many centimetres are in 37 m? Reply with the number only.", "3700"),
        ("How many kilograms are in 39 t? Reply with the number only.", "39000")), 1)}
    failed = [_result(i, "", q, "wrong") for i, (q, _) in asked.items()]
    tasks = {i: Task(id=i, prompt=q, reference=[a]) for i, (q, a) in asked.items()}
    model = ScriptedModel([json.dumps({"difference": "units", "rules": [JOINED_WITH_ONE_CLAUSE]}),
                           json.dumps({"difference": "units", "rules": []})])
    patch = analyse("failure", failed, QA_SKILL, model,
                    ReflectSettings(form="rules", max_edits=1), "", 0,
                    evidence=Evidence.of(failed, tasks), tasks=tasks)
    assert patch.edits == ()
    assert [r.item.content for r in patch.refused] == [
        "- Use the unit symbol (mm) in your reply if you know it."]
    assert "'mm'" in patch.refused[0].reason


def test_a_skill_line_urged_again_is_the_skill_again() -> None:
    """The clock-time analysts wrote two of the skill's lines back with "ensure" and "Always"
    before them, which the screen rolled out as a candidate of their own."""
    from skillgrad.stages.restated import restated_part

    skill = ("# Answering questions\n\n- Read the question and the context carefully before "
             "answering.\n- Use the context when one is given; otherwise rely on what you "
             "know.\n- End your reply with a line of the form `Answer: <your answer>`.\n")
    for urged, part in (
            ("- Before you answer, ensure you read the question and the context carefully.",
             "Read the question and the context carefully before answering."),
            ("- Always end your reply with a line of the form 'Answer: <your answer>'.",
             "End your reply with a line of the form `Answer: <your answer>`."),
            ("- Make sure to end your reply with a line of the form Answer: <your answer>.",
             "End your reply with a line of the form `Answer: <your answer>`."),
            ("- Please remember to use the context when one is given.",
             "Use the context when one is given; otherwise rely on what you know."),
            # Screened on a times set: a line with "both", and the whole skill after a label.
            ("- Before you answer, make sure to read both the question and the context "
             "carefully", "Read the question and the context carefully before answering."),
            ("- Reply with: Read the question and the context carefully before answering. Use "
             "the context when one is given; otherwise rely on what you know. End your reply "
             "with a line of the form `Answer: <your answer>`.",
             "Read the question and the context carefully before answering.; Use the context "
             "when one is given; otherwise rely on what you know.; End your reply with a line "
             "of the form `Answer: <your answer>`.")):
        assert restated_part(urged, skill) == part, urged
    for rule in ("- Always end your reply with the unit symbol.",
                 "- Make sure the time has two digits per field.",
                 "- Reply with: the time in HH:MM, then the answer line.",
                 "- Ensure you never use the context."):
        assert restated_part(rule, skill) is None, rule


def test_one_reply_keeps_one_of_its_restatements_and_a_rule_written_again_is_no_loss() -> None:
    """The reading example's analyst wrote three wordings of one rule in one reply ("remove
    any words that are not in the answer", "... in the reply but not in the answer", ...), and
    two went into the skill side by side. Only the first of a reply's restatements is kept;
    a kept rule the second reply writes again word for word is not reported as lost."""
    first = {"difference": "extra words", "rules": [
        "Reply with the answer only.", "Reply with only the answer.",
        "Reply with the answer, as read from the reply"]}
    second = {"difference": "extra words", "rules": [
        "Reply with the answer only.",
        "When the question asks for a date, give day, month and year."]}
    patch, _ = _asked_twice(first, second, "It was 1902.", "1902", max_edits=3)
    assert [e.content for e in patch.edits] == [
        "- Reply with the answer only.",
        "- When the question asks for a date, give day, month and year."]
    assert patch.restated == ("'- Reply with only the answer.' restates the same reply's "
                              "'- Reply with the answer only.'; left out",)
    assert [r.item.content for r in patch.refused] == [
        "- Reply with the answer, as read from the reply."]


def test_restates_needs_most_words_of_both() -> None:
    from skillgrad.stages.restated import restates

    assert restates("Remove the extra words from the reply.",
                    "Leave the extra words out of the reply.")
    assert not restates("Reply with the answer.", "Reply with the answer, then stop and check "
                        "the passage for a shorter span.")
    assert not restates("Search before you answer.", "Reply with the shortest span.")


def test_a_rule_copying_what_every_task_tells_the_agent_is_refused() -> None:
    """doc_qa's analyst copied the tool protocol's own sentence into a rule; the agent is told
    it after its skill on every task, so the rule changes nothing and is refused as
    scaffolding. A rule that names the tool in its own words passes."""
    from skillgrad.envs.tools import Tool, text_protocol

    search = Tool(name="search", description="Search the documents; returns titles.",
                  parameters={"type": "object", "properties": {"query": {"type": "string"}}},
                  run=lambda query: "")
    skill = "# Documents\n\nAnswer from the documents."
    system = f"{skill}\n\n{text_protocol([search])}"
    results = [RolloutResult(task_id=f"t{i}", answer="x", hard=0.0, soft=0.0, reason="wrong",
                             messages=(Message(role="system", content=system),
                                       Message(role="user", content=question),
                                       Message(role="assistant", content="ANSWER: x")))
               for i, question in enumerate(["Who founded the mill?", "When did it close?",
                                             "What did it cost?"])]
    evidence = Evidence.of(results)
    quote = find_quote("Reply with exactly one line and nothing else, for example: ACTION: "
                       'search {"query": "..."}', evidence, skill)
    assert quote is not None and quote.kind == "scaffolding"
    assert find_quote("Before you answer, call search with the question's names.",
                      evidence, skill) is None


def test_an_analysts_one_format_for_every_question_goes_on_as_the_format_each_asks_for() -> None:
    """The dates set's analysts, shown questions that ask for three formats, wrote one for all.
    The rule goes on with the format each question asks for, the format taken out is reported,
    and the analyst is not asked again for it."""
    from skillgrad.models.scripted import ScriptedModel
    from skillgrad.stages.reflect import ReflectSettings, analyse

    asked = {"d1": ("Write the date 2021-03-04 in the format DD/MM/YYYY.", "04/03/2021"),
             "d2": ("Write the date 12/06/2022 in the format YYYY-MM-DD.", "2022-06-12"),
             "d3": ("What is the date 3 days after 2020-01-30? Give it in the format Month D, "
                    "YYYY.", "February 2, 2020")}
    failed = [RolloutResult(task_id=i, answer="2021-03-04", hard=0.0, soft=0.0, reason="wrong",
                            messages=(Message(role="system", content="S"),
                                      Message(role="user", content=q),
                                      Message(role="assistant", content="2021-03-04")))
              for i, (q, _) in asked.items()]
    model = ScriptedModel([json.dumps({"difference": "wrong format", "rules": [
        "Before you answer, ensure the date is formatted as YYYY-MM-DD."]})])
    tasks = {i: Task(id=i, prompt=q, reference=[a]) for i, (q, a) in asked.items()}
    patch = analyse("failure", failed, "# Skill\n\nAnswer.\n", model,
                    ReflectSettings(form="rules", max_edits=2), "", 0,
                    Evidence.of(failed, tasks), tasks=tasks)
    assert [e.content for e in patch.edits] == [
        "- Before you answer, ensure the date is in the format the task asks for "
        "(DD/MM/YYYY, YYYY-MM-DD or Month D, YYYY)."]
    assert [(r.item.content, r.reason.split(":")[1].strip()) for r in patch.refused] == [
        ("YYYY-MM-DD", "makes a form that training item 'd2' asks for a rule for every task, "
                       "where other tasks ask for another (say when it applies, or follow the "
                       "form each task asks for)")]
    assert patch.refused[0].repaired and patch.refused[0].reason.endswith(
        "; the rule went on with the format the task asks for in its place")
    # The step line counts it apart from rules refused whole.
    from skillgrad.stages.candidate import Proposal
    whole = Refused(item=Edit(op="append", content="Quote item d1."), reason="refused")
    assert Proposal(candidate="", refused=(*patch.refused, whole)).losses() == (
        "hygiene refused 1", "hygiene reworded 1")
    assert len(model.calls) == 1


def test_a_value_the_agent_answered_one_task_with_is_that_tasks() -> None:
    """On a time-arithmetic set the screen rolled out "- Reply with 'Answer: 19:09:52'" (one
    task's wrong reply, its gold 20:09:52) and the gate took up "... removing the digit '3' in
    '3:40' and replacing it with '03'" (another's). A value read from one reply is refused
    whole, as a gold answer is; a reply many tasks share, or one with no number, is not."""
    def result(task_id: str, answer: str) -> RolloutResult:
        return RolloutResult(task_id=task_id, answer=answer, hard=0.0, soft=0.0, messages=(
            Message(role="user", content=f"Question {task_id}: how long? Reply in HH:MM:SS."),
            Message(role="assistant", content=f"Answer: {answer}")))

    ev = Evidence.of([result("t1", "19:09:52"), result("t2", "3:40"), result("t3", "unknown"),
                      result("t4", "08:12:51")])
    quote = find_quote("- Reply with 'Answer: 19:09:52'", ev)
    assert quote is not None and (quote.kind, quote.quoted, quote.task_id) == (
        "reply", "19 09 52", "t1")
    assert quote.reason() == "quotes the agent's reply to training item 't1': '19 09 52'"
    quote = find_quote("- Before you answer, make sure your reply follows the requested form by "
                       "removing the digit '3' in '3:40' and replacing it with '03'.", ev)
    assert quote is not None and (quote.kind, quote.task_id) == ("reply", "t2")
    for fine in ("- If the passage does not say, reply 'unknown'.",
                 "- Write hours with two digits.",
                 "- Reply with the time in the format the task asks for."):
        assert find_quote(fine, ev) is None, fine
    shared = Evidence.of([result(f"s{i}", "12:00") for i in range(4)])
    assert find_quote("- If it ends at noon, reply 12:00.", shared) is None
    assert find_quote("- Reply with 'Answer: 12:00'.", shared) is None  # every task's
    # A short one in an answer line: a letter-counting analyst wrote "Reply with 'Answer: 2'
    # before you answer", the count of two of its six questions.
    counts = {"c1": ("8", "8"), "c2": ("3", "3"), "c3": ("7", "9"), "c4": ("3", "2"),
              "c5": ("5", "2"), "c6": ("2", "1")}
    ev = Evidence.of([result(i, reply) for i, (reply, _) in counts.items()],
                     {i: Task(id=i, prompt="", reference=[gold])
                      for i, (_, gold) in counts.items()})
    quote = find_quote("- Reply with 'Answer: 2' before you answer", ev)
    assert quote is not None and (quote.kind, quote.quoted, quote.task_id) == ("answer", "2", "c4")
    quote = find_quote("- End with 'Answer: 5'.", ev)
    assert quote is not None and (quote.kind, quote.task_id) == ("reply", "c5")
    quote = find_quote("- Answer: 2", ev)  # the line alone
    assert quote is not None and (quote.kind, quote.task_id) == ("answer", "c4")
    for fine in ("- End with a line such as 'Answer: 2'.", "- Reply with 'Answer: 4'.",
                 "- End with 'Answer: <your answer>'.", "- Write 2 digits in each field."):
        assert find_quote(fine, ev) is None, fine


def test_a_training_answer_refused_earlier_is_refused_again_alone() -> None:
    """The reading example's analyst wrote "Reply with 'An architect' or 'architect'." (a gold
    answer of its step's batch, refused); the rejected buffer showed it, and at the next step,
    whose batch does not hold that item, another analyst wrote the answer back inside a longer
    rule. The answer alone now repeats the refusal; the words of a refusal for other reasons
    still need five in a row."""
    from skillgrad.stages.hygiene import REFUSED, Quote, quoted_alone

    first = "- Reply with 'An architect' or 'architect'."
    reason = f"{REFUSED}: {Quote('answer', 'An architect', '57273').reason()}"
    assert quoted_alone(reason)
    results = [_result("t9", "The harbour froze in 1902.", "When did the harbour freeze?")]
    again = "Reply with the answer provided in the context, which is 'An architect'."
    shown = Evidence.of(results, refused=[(first, "An architect", quoted_alone(reason))])
    cleaned = clean_text(again, shown)
    assert cleaned.clean is None and cleaned.removed[0][1].kind == "refused"
    assert cleaned.removed[0][1].quoted == "an architect"
    assert clean_text(again, Evidence.of(results, refused=[(first, "An architect")])).clean \
        == again
    for other in (Quote("analysis", "plus 5 more words").reason(),
                  Quote("unseen", "the answer").reason()):
        assert not quoted_alone(f"{REFUSED}: {other}")
    assert not quoted_alone(f"{reason}; the rule went on with the format the task asks for in "
                            "its place")


def test_the_rejected_buffer_counts_the_texts_refused_for_an_items_words_and_shows_none() -> None:
    """What the analysts read of a text refused for a training item's words is a count: shown,
    the words were written back at the next step, and masked, the mask was ("- Reply with the
    answer [that item's words]." on the unit-conversion set)."""
    from skillgrad.records import Edit, RejectedStep
    from skillgrad.stages.hygiene import REFUSED, Quote
    from skillgrad.stages.render import render_rejected

    item = RejectedStep(global_step=1, edits=(Edit(op="append", content="- Reply with 'An "
                                                   "architect' or 'architect'."),),
                        note=f"{REFUSED}: {Quote('answer', 'an architect', '57273').reason()}",
                        quoted="an architect")
    shown = render_rejected([item])
    assert "architect" not in shown and "57273" not in shown
    assert shown.endswith("(1 more refused before rollout for holding the words of a training "
                          "item, not shown)\n")
    # A text refused for what it is (an echo of the analysis) is shown as it was written; so
    # is a rule the gate rejected, and one refused for an item's words that went on repaired.
    echo = RejectedStep(global_step=1, edits=(Edit(op="append", content="- Share 1 word with "
                                                   "the answer."),),
                        note=f"{REFUSED}: {Quote('analysis', 'share 1 word').reason()}",
                        quoted="share 1 word")
    gated = RejectedStep(global_step=2, edits=(Edit(op="append", content="- Be brief."),),
                         delta=-0.125)
    shown = render_rejected([echo, gated])
    assert "- Share 1 word with the answer." in shown and "'share 1 word'" in shown
    assert "- append: '- Be brief.' (score change -0.125)" in shown
    assert "not shown" not in shown


@pytest.mark.parametrize(("text", "kept", "cut"), [
    # The units run's rule: its string closed after "use"; what comes before the ';' speaks of
    # the reference, so nothing is left.
    ("- Before you answer, check if the units match the answer; If the units are correct, use",
     None, "- If the units are correct, use"),
    ("- rulie:", None, "- rulie:"),
    ("- Use this format:", None, "- Use this format:"),
    ("- Read the question carefully before answering, and end the reply with a", None,
     "- Read the question carefully before answering, and end the reply with a"),
    ("- Reply with the number. Then add the", "- Reply with the number.", "- Then add the"),
    ("- Write each unit as its symbol; then give your", "- Write each unit as its symbol.",
     "- then give your"),
    ("- Reply with the number,", None, "- Reply with the number,"),
    ("- Reply in the format the question asks for, with two digits per field, and", None,
     "- Reply in the format the question asks for, with two digits per field, and"),
])
def test_a_rule_that_stops_mid_sentence_keeps_only_what_it_finished(
        text: str, kept: str | None, cut: str) -> None:
    """A small model's string sometimes closes before its rule does. What it finished (up to
    its last sentence or ';') goes on if it is clean on its own; the rest is refused, with the
    end it stopped at."""
    result = clean_text(text, Evidence())
    assert result.clean == kept
    assert result.removed[0][0] == cut
    assert result.removed[0][1].reason().startswith("stops mid-sentence: ")


@pytest.mark.parametrize("text", [
    "- Use the format the question asks for.",
    "- Search first, then read the section the search points to, then answer.",
    "- Finish with ANSWER:",
    "- End your reply with Answer:",
    "## Steps:",
    "- Reply with the answer only",
    "- If you are unsure, say so.",
    "- Convert the value to the unit the question tells you to use.",
    "- Reply with the unit symbol, such as 'a'",
    "- Do it as well as you can",
    "- Steps:\n  1. Search.\n  2. Read the section.",
])
def test_a_rule_that_ends_where_a_sentence_can_is_not_cut(text: str) -> None:
    assert clean_text(text, Evidence()).clean == text


def test_a_rule_that_stops_mid_sentence_and_quotes_is_refused_for_the_quote() -> None:
    """The quote binds later texts and tells the analyst more than where the rule stopped: a
    gold answer refused only as unfinished could come back finished at a later step."""
    for text in ("- Read the passage below carefully and then answer the question, and",
                 "- Reply with '1902' and"):
        result = clean_text(text, _evidence())
        assert result.clean is None
        assert result.removed[0][1].kind != "unfinished", text


def test_an_analyst_told_its_rule_stopped_mid_sentence_may_finish_it() -> None:
    """Refused whole, the unfinished rule is shown to its analyst with why; the same words
    finished in its next reply go on, and a later step's evidence does not hold the refusal
    against them (:func:`refused_texts`)."""
    from skillgrad.records import RejectedStep
    from skillgrad.stages.hygiene import REFUSED, refused_texts

    first = {"difference": "units", "rules": ["If the question names a unit, use"]}
    second = {"difference": "units", "rules": [
        "If the question names a unit, use its symbol in your reply."]}
    patch, model = _analysed([json.dumps(first), json.dumps(second)], "58", "58 mm", 1,
                             QA_SKILL)
    assert [e.content for e in patch.edits] == [
        "- If the question names a unit, use its symbol in your reply."]
    assert [r.item.content for r in patch.refused] == ["- If the question names a unit, use"]
    reason = patch.refused[0].reason
    assert reason == f"{REFUSED}: stops mid-sentence: 'names a unit, use'"
    assert "stops mid-sentence" in model.calls[1].messages[-1].text()
    # The rejected buffer after the step: this refusal, one for a training item's words, and
    # a rejection by the gate.
    unfinished = patch.refused[0]
    item = Edit(op="append", content="- Reply with 'the castings cracked'.")
    buffer = [RejectedStep(global_step=1, edits=(unfinished.item,), note=reason,
                           quoted=unfinished.quoted),
              RejectedStep(global_step=1, edits=(item,), quoted="the castings cracked",
                           note=f"{REFUSED}: quotes training item 't1': 'the castings cracked'"),
              RejectedStep(global_step=1, edits=(Edit(op="append", content="- Be brief."),),
                           delta=-0.1)]
    assert refused_texts(buffer) == [(item.content, "the castings cracked", True)]
    # Held against later texts, the unfinished words would refuse the rule finished.
    held = Evidence.of([], refused=[(unfinished.item.content, unfinished.quoted, False)])
    assert find_quote("- If the question names a unit, use its symbol.", held) is not None
    later = Evidence.of([], refused=refused_texts(buffer))
    assert find_quote("- If the question names a unit, use its symbol.", later) is None
    assert find_quote("- Reply with 'the castings cracked' in full.", later) is not None
