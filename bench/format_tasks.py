"""Question-answer sets of kinds no bundled example holds, to check training on data of one's
own the way a new user would: each answer is to be written in the format its question names.

``dates``: half the questions restate a date in another format, half ask for the date some
days after one; the format asked for is one of ``YYYY-MM-DD``, ``DD/MM/YYYY`` and
``Month D, YYYY``. ``times``: clock-time arithmetic (how long something lasted, or when it
ends), in ``HH:MM`` or ``HH:MM:SS``, over a handful of everyday settings. ``units``: a quantity converted to
another unit (km to metres, kg to grams, hours to minutes, ...), answered with the number and
its unit symbol ("2500 g") or with the number alone. In each the format is chosen per question,
so no one fixed format is right for every question. ``letters`` is of another kind: how many
times a letter appears in a word, how many letters a word has, or how many vowels, each word
asked about once; the answer is a number, and what helps is a way of working (spelling the
word out before counting), not a format. Its replies may run to 200 tokens, room for such
working. Generation is seeded, so the same command writes the same file.

    python bench/format_tasks.py OUT_DIR [--kind dates|times|units|letters] [--n 120] [--seed 0]

OUT_DIR gets ``data.jsonl`` and a ``config.yaml``: the ``qa`` environment with its own initial
skill, and the quickstart's training settings (four steps of six questions, sized for 2 cores).
Nothing in it is tuned to the kind. Then, for example:

    python bench/compare.py OUT_DIR/config.yaml --seeds 3 --methods initial,skillgrad
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
from collections.abc import Callable
from pathlib import Path

DATE_FORMATS = {
    "YYYY-MM-DD": lambda d: d.strftime("%Y-%m-%d"),
    "DD/MM/YYYY": lambda d: d.strftime("%d/%m/%Y"),
    "Month D, YYYY": lambda d: f"{d.strftime('%B')} {d.day}, {d.year}",
}

# Settings for a span of clock time: what started, and the words for its start and end.
SPANS = [
    ("A phone call", "started at", "ended at"),
    ("A train", "left at", "arrived at"),
    ("A meeting", "began at", "finished at"),
    ("A bread dough", "went into the oven at", "came out at"),
    ("A backup job", "started at", "completed at"),
    ("A runner", "set off at", "crossed the finish line at"),
]


CONFIG = """\
env:
  name: qa
  data_path: data.jsonl
  max_tokens: {max_tokens}
train:
  num_epochs: 1
  batch_size: 6
  steps_per_epoch: 4
gradient:
  minibatch_size: 6
  failure_only: true
  analyst_workers: 1
  max_trajectory_chars: 800
  drop_riders: true
optimizer:
  learning_rate: 2
  min_learning_rate: 1
  max_tokens: 400
"""


def date_task(rng: random.Random, n: int) -> dict[str, str]:
    start = dt.date(2020, 1, 1) + dt.timedelta(days=rng.randrange(0, 7 * 365))
    shown_as, asked = rng.sample(sorted(DATE_FORMATS), 2)
    given = DATE_FORMATS[shown_as](start)
    if rng.random() < 0.5:
        question = f"Write the date {given} in the format {asked}."
        answer = DATE_FORMATS[asked](start)
    else:
        days = rng.randint(2, 20)
        question = f"What is the date {days} days after {given}? Give it in the format {asked}."
        answer = DATE_FORMATS[asked](start + dt.timedelta(days=days))
    return {"id": f"date-{n:03d}", "question": question, "answer": answer}


def _clock(seconds: int, with_seconds: bool) -> str:
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h:02d}:{m:02d}:{s:02d}" if with_seconds else f"{h:02d}:{m:02d}"


def time_task(rng: random.Random, n: int) -> dict[str, str]:
    what, began, ended = rng.choice(SPANS)
    with_seconds = rng.random() < 0.5
    form = "HH:MM:SS" if with_seconds else "HH:MM"
    step = 1 if with_seconds else 60
    start = rng.randrange(6 * 3600, 16 * 3600, step)
    length = rng.randrange(10 * 60, 5 * 3600, step)
    if rng.random() < 0.5:
        question = (
            f"{what} {began} {_clock(start, with_seconds)} and {ended} "
            f"{_clock(start + length, with_seconds)}. How long did it take? Reply in {form}."
        )
        answer = _clock(length, with_seconds)
    else:
        took = _clock(length, with_seconds)
        question = (
            f"{what} {began} {_clock(start, with_seconds)} and took {took} ({form}). "
            f"At what time did it end? Reply in {form}."
        )
        answer = _clock(start + length, with_seconds)
    return {"id": f"time-{n:03d}", "question": question, "answer": answer}


# Unit conversions: (from, to, factor, what is measured, the target unit's name).
CONVERSIONS = [
    ("km", "m", 1000, "a running track", "metres"), ("m", "cm", 100, "a plank", "centimetres"),
    ("cm", "mm", 10, "a screw", "millimetres"), ("kg", "g", 1000, "a bag of flour", "grams"),
    ("L", "mL", 1000, "a bottle of water", "millilitres"), ("h", "min", 60, "a film", "minutes"),
    ("min", "s", 60, "a song", "seconds"), ("t", "kg", 1000, "a small truck's load", "kilograms"),
]
# How a question asks for its answer: the number with its unit symbol, or the number alone.
UNIT_FORMS = [("Reply with the number and the unit symbol.", True),
              ("Reply with the number only.", False),
              ("Give the value in {name}, written with its unit symbol.", True),
              ("Answer with just the number.", False)]
UNIT_QUESTIONS = ["{thing} measures {q} {unit}. How much is that in {name}? {form}",
                  "Convert {q} {unit} ({thing}) to {name}. {form}",
                  "How many {name} are in {q} {unit}? {form}"]


def unit_task(rng: random.Random, n: int) -> dict[str, str]:
    unit, to, factor, thing, name = rng.choice(CONVERSIONS)
    q = rng.choice([rng.randint(2, 40), round(rng.uniform(0.1, 9.9), 1),
                    round(rng.uniform(0.05, 2.5), 2)])
    value = round(q * factor, 6)
    shown = str(int(value)) if value == int(value) else repr(value)
    form, with_symbol = rng.choice(UNIT_FORMS)
    question = rng.choice(UNIT_QUESTIONS)
    question = question.format(
        thing=thing.capitalize() if question.startswith("{thing}") else thing, q=q, unit=unit,
        name=name, form=form.format(name=name))
    return {"id": f"unit-{n:03d}", "question": question,
            "answer": f"{shown} {to}" if with_symbol else shown}


# Words to count letters in, each asked about once: doubled letters and runs of vowels, where
# counting at a glance goes wrong.
LETTER_WORDS = """strawberry banana committee mississippi bookkeeper balloon coffee address
assessment cucumber engineer necessary occasion parallel possession tomorrow umbrella vacuum
volleyball accommodate beginning butterfly chocolate dictionary elephant grammar hippopotamus
internet millennium pepperoni raccoon satellite succession tennessee referee sheep kangaroo
caterpillar broccoli spaghetti giraffe independent embarrass definitely recommend appearance
bulletin cinnamon exaggerate harass apparatus barrel cabbage daffodil eggplant flamingo gorilla
hammock illusion jellyfish kettle lollipop mammoth noodle opossum puppet quarrel rabbit
scissors tattoo tunnel waffle yellow zucchini assassin bubble coconut dilemma efficient fossil
gallop horrible irritate juggle kitten letter mattress nutmeg oppose pillow pineapple
questionnaire running saddle terrible unnecessary village winner attitude carrot dessert follow
glossary happiness innocent jogging buffalo colossal cheese marshmallow occurrence parrot
sorrow summer swimming teeth toffee typhoon wheelbarrow zeppelin cappuccino""".split()


def letter_tasks(rng: random.Random, count: int) -> list[dict[str, str]]:
    if count > len(LETTER_WORDS):
        raise SystemExit(f"--kind letters: at most {len(LETTER_WORDS)} tasks (one a word)")
    tasks = []
    for n, word in enumerate(rng.sample(LETTER_WORDS, count)):
        asked = n % 3
        if asked == 0:
            letter = rng.choice(sorted(set(word)))
            question = f"How many times does the letter '{letter}' appear in the word '{word}'?"
            answer = word.count(letter)
        elif asked == 1:
            question = f"How many letters does the word '{word}' have?"
            answer = len(word)
        else:
            question = f"How many vowels (a, e, i, o, u) are in the word '{word}'?"
            answer = sum(c in "aeiou" for c in word)
        tasks.append({"id": f"letters-{n:03d}", "question": f"{question} Reply with the number.",
                      "answer": str(answer)})
    return tasks


def _each(task: Callable[[random.Random, int], dict[str, str]]
          ) -> Callable[[random.Random, int], list[dict[str, str]]]:
    return lambda rng, count: [task(rng, n) for n in range(count)]


KINDS: dict[str, Callable[[random.Random, int], list[dict[str, str]]]] = {
    "dates": _each(date_task),
    "times": _each(time_task),
    "units": _each(unit_task),
    "letters": letter_tasks,
}
# The reply's token budget: a number or a date needs few; counting may show its working.
MAX_TOKENS = {"letters": 200}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--kind", choices=sorted(KINDS), default="dates")
    parser.add_argument("--n", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "data.jsonl").open("w") as f:
        for task in KINDS[args.kind](rng, args.n):
            f.write(json.dumps(task) + "\n")
    (args.out / "config.yaml").write_text(CONFIG.format(max_tokens=MAX_TOKENS.get(args.kind, 48)))
    print(f"{args.n} tasks in {args.out / 'data.jsonl'}; config: {args.out / 'config.yaml'}")


if __name__ == "__main__":
    main()
