"""Generate the quickstart reading-comprehension set (``data.jsonl``) from a seed.

Every context paragraph describes a fictional entity (a company, a town, a ship or a person)
invented here from syllables and word lists, so the data is ours to license (MIT, with
skillgrad) and every gold answer is an exact span of its context.

The questions are easy to *know* but easy to *answer in the wrong form* for a small model:
full sentences ("The company was founded in 1987."), extra units ("4,200 people"), a title or a
surname instead of the full name as written, "Yes, it is." instead of "yes". A skill rule such as
"reply with only the shortest exact span from the context" fixes many of them, which is what the
quickstart shows skillgrad learning.

Usage: ``python examples/quickstart/make_data.py [--seed N] [--out PATH]``. Standard library only;
the same seed always writes the same file.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from pathlib import Path

SEED = 1
QUESTIONS_PER_ENTITY = 4
ENTITY_COUNTS = {"company": 4, "town": 4, "ship": 4, "person": 3}

_PREFIXES = [
    "Brae",
    "Cal",
    "Dor",
    "Fen",
    "Gal",
    "Hask",
    "Ister",
    "Kel",
    "Lun",
    "Mar",
    "Nor",
    "Ost",
    "Pell",
    "Quen",
    "Rav",
    "Sel",
    "Tor",
    "Vel",
    "Wyn",
    "Zan",
    "Ard",
    "Bel",
    "Cor",
    "Elm",
    "Fal",
    "Grim",
    "Hol",
    "Ith",
    "Jas",
    "Kor",
]
_SUFFIXES = [
    "mere",
    "holt",
    "wick",
    "stead",
    "brook",
    "ford",
    "vale",
    "marsh",
    "crest",
    "gate",
    "haven",
    "moor",
    "by",
    "ton",
    "well",
    "thorpe",
]
_GIVEN = [
    "Ada",
    "Brin",
    "Corin",
    "Delia",
    "Esko",
    "Fara",
    "Galen",
    "Hesper",
    "Ilse",
    "Joren",
    "Kaia",
    "Lorcan",
    "Mireille",
    "Nico",
    "Orla",
    "Pim",
    "Rhosyn",
    "Sabe",
    "Tamsin",
    "Ulric",
    "Vida",
    "Wendel",
    "Yara",
    "Zeno",
    "Anouk",
    "Bastian",
    "Cosima",
    "Dario",
    "Elin",
    "Fenna",
]
_COLORS = [
    "red",
    "blue",
    "green",
    "yellow",
    "orange",
    "purple",
    "teal",
    "grey",
    "white",
    "black",
    "brown",
    "pink",
]
_ANIMALS = ["fox", "heron", "otter", "stag", "owl", "hare", "lynx", "badger", "swan", "wolf"]
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_PRODUCTS = [
    ("Instruments", "measuring instruments"),
    ("Textiles", "woollen cloth"),
    ("Ceramics", "kitchen ceramics"),
    ("Optics", "telescope lenses"),
    ("Bicycles", "touring bicycles"),
    ("Lanterns", "storm lanterns"),
    ("Clockworks", "tower clocks"),
    ("Paperworks", "drawing paper"),
]
_FESTIVALS = ["Lantern", "Harvest", "Kite", "Cheese", "River", "Bell", "Apple", "Ferry"]
_SHIP_ADJ = ["Silver", "Crimson", "Quiet", "Northern", "Patient", "Amber", "Restless", "Golden"]
_SHIP_BIRD = ["Heron", "Petrel", "Kestrel", "Tern", "Curlew", "Plover", "Gannet", "Shearwater"]
_SHIP_TYPES = ["schooner", "ferry", "research vessel", "cargo ship", "lighthouse tender"]
_PROFESSIONS = ["cartographer", "glassblower", "composer", "botanist", "clockmaker", "beekeeper"]
_INSTRUMENTS = ["cello", "accordion", "oboe", "banjo", "harp", "trombone", "fiddle"]
_TITLE_WORDS = [
    ("Salt", "Road"),
    ("Winter", "Orchard"),
    ("Paper", "Lighthouse"),
    ("Copper", "Tide"),
    ("Hollow", "Bell"),
    ("Seventh", "Lantern"),
    ("Borrowed", "Compass"),
    ("Quiet", "Harbour"),
]

Question = tuple[str, list[str], str]  # question, acceptable answers, answer kind


class Names:
    """Unique fictional names drawn from syllables and word lists."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def unique(self, make: Callable[[], str]) -> str:
        while True:
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name

    def place(self) -> str:
        return self.unique(lambda: self.rng.choice(_PREFIXES) + self.rng.choice(_SUFFIXES))

    def person(self) -> str:
        return self.unique(lambda: f"{self.rng.choice(_GIVEN)} {self.place()}")

    def pick(self, pool: list[str]) -> str:
        return self.unique(lambda: self.rng.choice(pool))


def yes_no(value: bool) -> list[str]:
    return ["yes"] if value else ["no"]


def company(rng: random.Random, names: Names) -> tuple[str, str, list[Question]]:
    kind, product = rng.choice(_PRODUCTS)
    name = f"{names.place()} {kind}"
    founder, town1, town2 = names.person(), names.place(), names.place()
    year = rng.randint(1850, 1985)
    moved = year + rng.randint(8, 35)
    employees, workshops = rng.randint(12, 480) * 100, rng.randint(3, 19)
    color, animal = rng.choice(_COLORS), rng.choice(_ANIMALS)
    before = year + rng.choice([-7, -3, 4, 9])
    context = (
        f"{name} is a maker of {product} founded in {year} by {founder} in the town of {town1}. "
        f"In {moved} the company moved its headquarters to {town2}, where it still runs "
        f"{workshops} workshops. Today it employs {employees:,} people. Its logo shows a "
        f"{color} {animal}."
    )
    questions: list[Question] = [
        (f"In which year was {name} founded?", [str(year)], "year"),
        (f"Who founded {name}?", [founder], "name"),
        (f"How many people does {name} employ?", [str(employees)], "count"),
        (f"In which town is the headquarters of {name} today?", [town2], "place"),
        (f"What color is the animal in the logo of {name}?", [color], "color"),
        (f"How many workshops does {name} run?", [str(workshops)], "count"),
        (f"Was {name} founded before {before}?", yes_no(year < before), "yes/no"),
        (f"In which year did {name} move its headquarters?", [str(moved)], "year"),
    ]
    return name, context, questions


def town(rng: random.Random, names: Names) -> tuple[str, str, list[Question]]:
    name, twin, river, other_river = names.place(), names.place(), names.place(), names.place()
    mayor = names.person()
    charter = rng.randint(1120, 1790)
    elected = rng.randint(2009, 2023)
    population = rng.randint(15, 900) * 100 + rng.randint(1, 99)
    month, festival, color = rng.choice(_MONTHS), names.pick(_FESTIVALS), rng.choice(_COLORS)
    asked_river = rng.choice([river, other_river])
    context = (
        f"{name} is a market town on the {river} River. It received its charter in {charter} and "
        f"has {population:,} inhabitants. The current mayor, {mayor}, was elected in "
        f"{elected}. Every {month} the town holds the {festival} Festival, which draws visitors "
        f"from {twin}. The town hall is painted {color}."
    )
    questions: list[Question] = [
        (f"In which year did {name} receive its charter?", [str(charter)], "year"),
        (f"How many people live in {name}?", [str(population)], "count"),
        (f"Who is the mayor of {name}?", [mayor], "name"),
        (f"In which month is the {festival} Festival of {name} held?", [month], "month"),
        (f"On which river does {name} lie?", [f"{river} River", river], "place"),
        (f"What color is the town hall of {name}?", [color], "color"),
        (f"Is {name} on the {asked_river} River?", yes_no(asked_river == river), "yes/no"),
        (f"In which year was the mayor of {name} elected?", [str(elected)], "year"),
    ]
    return name, context, questions


def ship(rng: random.Random, names: Names) -> tuple[str, str, list[Question]]:
    name = "the " + names.unique(lambda: f"{rng.choice(_SHIP_ADJ)} {rng.choice(_SHIP_BIRD)}")
    kind, yard, home, captain = (
        rng.choice(_SHIP_TYPES),
        names.place(),
        names.place(),
        names.person(),
    )
    year, month, day = rng.randint(1952, 2019), rng.choice(_MONTHS), rng.randint(1, 28)
    command = rng.randint(year + 1, 2024)
    length, crew, color = rng.randint(24, 140), rng.randint(6, 60), rng.choice(_COLORS)
    threshold = length + rng.choice([-15, -5, 6, 12])
    context = (
        f"{name[0].upper() + name[1:]} is a {kind} launched on {day} {month} {year} at the {yard} "
        f"shipyard. She is {length} metres long and carries a crew of {crew}. Her captain is "
        f"{captain}, who took command in {command}. The hull is painted {color}, and her home "
        f"port is {home}."
    )
    questions: list[Question] = [
        (
            f"On what date was {name} launched?",
            [f"{day} {month} {year}", f"{month} {day}, {year}"],
            "date",
        ),
        (
            f"How long is {name}?",
            [f"{length} metres", f"{length} meters", f"{length} m", str(length)],
            "length",
        ),
        (f"How many crew members does {name} carry?", [str(crew)], "count"),
        (f"Who is the captain of {name}?", [captain, f"Captain {captain}"], "name"),
        (f"What is the home port of {name}?", [home], "place"),
        (f"What color is the hull of {name}?", [color], "color"),
        (f"Is {name} longer than {threshold} metres?", yes_no(length > threshold), "yes/no"),
        (f"In which year did the captain of {name} take command?", [str(command)], "year"),
    ]
    return name, context, questions


def person(rng: random.Random, names: Names) -> tuple[str, str, list[Question]]:
    name, town1, town2, other = names.person(), names.place(), names.place(), names.place()
    surname = name.split()[-1]
    profession, instrument = rng.choice(_PROFESSIONS), rng.choice(_INSTRUMENTS)
    born = rng.randint(1941, 1992)
    first_year, books = born + rng.randint(24, 30), rng.randint(2, 14)
    adjective, noun = _TITLE_WORDS[rng.randrange(len(_TITLE_WORDS))]
    title = names.unique(lambda: f"The {adjective} {noun}")
    asked_town = rng.choice([town2, other])
    context = (
        f"{name} is a {profession} born in {born} in {town1}. {surname} has published {books} "
        f"books; the first, {title}, appeared in {first_year}. {surname} now lives in {town2} "
        f"and plays the {instrument} in a local band."
    )
    questions: list[Question] = [
        (f"In which year was {name} born?", [str(born)], "year"),
        (f"Where was {name} born?", [town1], "place"),
        (f"How many books has {name} published?", [str(books)], "count"),
        (f"What is the title of the first book by {name}?", [title], "title"),
        (f"In which year did the first book by {name} appear?", [str(first_year)], "year"),
        (f"Which instrument does {name} play?", [instrument], "thing"),
        (f"Who wrote {title}?", [name], "name"),
        (f"Does {name} live in {asked_town}?", yes_no(asked_town == town2), "yes/no"),
    ]
    return name, context, questions


MAKERS = {"company": company, "town": town, "ship": ship, "person": person}


def build(seed: int = SEED) -> list[dict[str, object]]:
    """All records for ``seed``: four questions on each of 15 fictional entities."""
    rng = random.Random(seed)
    names = Names(rng)
    records: list[dict[str, object]] = []
    for kind, count in ENTITY_COUNTS.items():
        for _ in range(count):
            name, context, questions = MAKERS[kind](rng, names)
            group = f"{kind}:{name.removeprefix('the ').lower().replace(' ', '-')}"
            picked = sorted(rng.sample(range(len(questions)), QUESTIONS_PER_ENTITY))
            for index in picked:
                question, answers, answer_kind = questions[index]
                records.append(
                    {
                        "id": f"qs-{len(records) + 1:03d}",
                        "question": question,
                        "answer": answers,
                        "context": context,
                        "group": group,
                        "kind": answer_kind,
                    }
                )
    return records


def write(records: list[dict[str, object]], out: Path) -> None:
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("data.jsonl"))
    args = parser.parse_args()
    records = build(args.seed)
    write(records, args.out)
    print(f"wrote {len(records)} records to {args.out}")


if __name__ == "__main__":
    main()
