"""Generating ALFWorld-style household games from the room layouts that ship with ``alfworld``
(the data-set builder of the ``household`` environment).

ALFWorld's own game files are produced from ALFRED trajectories recorded in the AI2-THOR
simulator; the ``alfworld`` package ships none of them, but it does ship what they are made of:
the PDDL domain, the text grammar, 120 room layouts (which object and receptacle types each room
has, and the receptacle instances with their positions) and ``gen/constants.py`` (which
receptacle may hold which object, which objects can be cleaned / heated / cooled / toggled).
From those this module writes PDDL problems for ALFWorld's six task types with the same goal
formulas (``alfworld.gen.goal_library``) and the same goal sentences ("Your task is to: put a
clean apple in fridge."). Everything is a pure function of ``(seed, task type, room)``.

Solving (the planner's walkthrough becomes the reference solution) lives in
:mod:`skillgrad.envs.household.engine`; :func:`generate_games` ties the two together.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillgrad.errors import ConfigError, DataError

TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
# The appliance each transforming task needs, and the predicate it makes true.
_TRANSFORM = {
    "pick_clean_then_place_in_recep": ("SinkBasin", "Cleanable"),
    "pick_heat_then_place_in_recep": ("Microwave", "Heatable"),
    "pick_cool_then_place_in_recep": ("Fridge", "Coolable"),
}
_LAMPS = ("DeskLamp", "FloorLamp")
# Furniture a lamp stands on (the ALFRED scenes put lamps on tables and desks; constants.py has
# no entry for lamps because they are never moved).
_LAMP_STANDS = ("SideTable", "Desk", "Dresser", "Nightstand", "DiningTable", "CoffeeTable",
                "Shelf", "TVStand", "Cabinet")
# Layout names that differ from the receptacle type the domain uses.
_RECEPTACLE_ALIASES = {"Sink": "SinkBasin", "Bathtub": "BathtubBasin"}


def _constants() -> Any:
    try:
        import alfworld.gen.constants as constants
    except ImportError:
        raise ConfigError('env household needs alfworld: pip install "skillgrad[household]"'
                          ) from None
    return constants


def _goal_library() -> Any:
    import alfworld.gen.goal_library as goal_library

    return goal_library


def layouts_dir() -> Path:
    """The ``FloorPlan*`` layout folder inside the installed ``alfworld`` package."""
    return Path(_constants().__file__).parent / "layouts"


def room_names() -> list[str]:
    """Every room with both layout files, ordered by floor-plan number."""
    rooms = [p.name[: -len("-objects.json")] for p in layouts_dir().glob("FloorPlan*-objects.json")]
    return sorted(rooms, key=lambda r: int(r[len("FloorPlan"):]))


@dataclass(frozen=True)
class Layout:
    """A room: its receptacle instances (type, ALFRED id) and the object types it contains."""

    room: str
    receptacles: tuple[tuple[str, str], ...]
    object_types: tuple[str, ...]


def load_layout(room: str) -> Layout:
    c = _constants()
    folder = layouts_dir()
    try:
        types = json.loads((folder / f"{room}-objects.json").read_text("utf-8"))
        openable = json.loads((folder / f"{room}-openable.json").read_text("utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{folder / room}: cannot read the room layout ({exc})") from None
    static = set(c.RECEPTACLES) - set(c.MOVABLE_RECEPTACLES)
    receptacles: list[tuple[str, str]] = []
    for key in sorted(openable):
        kind = _RECEPTACLE_ALIASES.get(key.split("|")[0], key.split("|")[0])
        if kind in static:
            receptacles.append((kind, key))
    have = {kind for kind, _ in receptacles}
    # Receptacles the room has but whose positions were not recorded (coffee machine, toaster,
    # stove burner, ...) get one instance with a position made up from the type name.
    for raw in sorted(set(types)):
        kind = _RECEPTACLE_ALIASES.get(raw, raw)
        if kind in static and kind not in have:
            receptacles.append((kind, f"{kind}|+0{len(kind) % 10}.00|+00.{len(raw):02d}|-00.50"))
            have.add(kind)
    return Layout(room, tuple(receptacles), tuple(sorted(set(types))))


def _pickupable() -> set[str]:
    c = _constants()
    held = set().union(*c.VAL_RECEPTACLE_OBJECTS.values())
    return {t for t in held if "Sliced" not in t and t in c.OBJECTS}


def _holders(layout: Layout, obj: str) -> list[str]:
    c = _constants()
    kinds = sorted({kind for kind, _ in layout.receptacles})
    return [k for k in kinds if obj in c.VAL_RECEPTACLE_OBJECTS.get(k, ())]


@dataclass(frozen=True)
class Params:
    """ALFRED's ``pddl_params``: the target object, its destination, the lamp (if any)."""

    object_target: str
    parent_target: str = ""
    toggle_target: str = ""


def candidates(task_type: str, layout: Layout) -> list[Params]:
    """Every parameter choice of ``task_type`` the room supports, in a stable order."""
    c = _constants()
    present = set(layout.object_types) & _pickupable()
    kinds = {kind for kind, _ in layout.receptacles}
    if task_type == "look_at_obj_in_light":
        lamps = [lamp for lamp in _LAMPS if lamp in layout.object_types]
        if not lamps or not kinds & set(_LAMP_STANDS):
            return []
        return [Params(obj, toggle_target=lamp) for lamp in lamps for obj in sorted(present)
                if _holders(layout, obj)]
    out: list[Params] = []
    for obj in sorted(present):
        allowed = _holders(layout, obj)
        if task_type in _TRANSFORM:
            appliance, ability = _TRANSFORM[task_type]
            if appliance not in kinds or obj not in c.VAL_ACTION_OBJECTS[ability]:
                continue
            # Putting the object back into the appliance it was transformed with is not a task.
            allowed = [k for k in allowed if k not in (appliance, "SinkBasin", "BathtubBasin")]
        for parent in allowed:
            # The target must start somewhere else, or the goal would hold before any action.
            if any(k != parent for k in _holders(layout, obj)):
                out.append(Params(obj, parent_target=parent))
    return out


def goal_text(task_type: str, params: Params, rng: random.Random) -> str:
    """ALFWorld's templated goal sentence (``get_templated_task_desc``)."""
    templates = _goal_library().gdict[task_type]["templates"]
    return str(rng.choice(templates)).format(
        obj=params.object_target.lower(), recep=params.parent_target.lower(),
        toggle=params.toggle_target.lower(), mrecep="")


def pddl_id(alfred_id: str) -> str:
    """ALFRED object id -> PDDL name, the way ALFWorld mangles it (``fix_pddl_str_chars``);
    lower case, as the planner returns names, so the demangler sees what it expects."""
    out = alfred_id
    for old, new in (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"),
                     (",", "_comma_")):
        out = out.replace(old, new)
    return out.lower()


def _coords(rng: random.Random) -> str:
    return "|".join(f"{rng.choice('+-')}{rng.uniform(0, 3):05.2f}" for _ in range(3))


@dataclass(frozen=True)
class Scene:
    """One generated game before solving."""

    receptacles: tuple[tuple[str, str], ...]
    objects: tuple[tuple[str, str, str], ...]  # (type, pddl id, receptacle pddl id)


def build_scene(task_type: str, params: Params, layout: Layout, rng: random.Random,
                max_receptacles: int = 12, distractors: int = 5) -> Scene:
    """Choose the receptacles shown (every type once, then more instances up to the cap, so
    observations stay short) and place the target, the lamp and a few distractor objects."""
    by_kind: dict[str, list[str]] = {}
    for kind, rid in layout.receptacles:
        by_kind.setdefault(kind, []).append(rid)
    chosen = [(k, ids[0]) for k, ids in sorted(by_kind.items())]
    extra = [(k, i) for k, ids in sorted(by_kind.items()) for i in ids[1:]]
    rng.shuffle(extra)
    chosen += extra[: max(0, max_receptacles - len(chosen))]
    receptacles = tuple(sorted((k, pddl_id(i)) for k, i in chosen))
    objects: list[tuple[str, str, str]] = []
    used: set[str] = set()

    def place(kind: str, where: Sequence[str]) -> None:
        spots = [rid for k, rid in receptacles if k in where]
        oid = pddl_id(f"{kind}|{_coords(rng)}")
        while oid in used:
            oid = pddl_id(f"{kind}|{_coords(rng)}")
        used.add(oid)
        objects.append((kind, oid, rng.choice(spots)))

    target = params.object_target
    start = [k for k in _holders(layout, target) if k != params.parent_target]
    count = rng.randint(2, 3) if task_type == "pick_two_obj_and_place" else rng.randint(1, 2)
    for _ in range(count):
        place(target, start)
    if params.toggle_target:
        place(params.toggle_target, [k for k in _LAMP_STANDS if k in by_kind][:1])
    others = sorted(set(layout.object_types) & _pickupable() - {target})
    for kind in rng.sample(others, min(distractors, len(others))):
        # A distractor of the target's destination type could satisfy nothing, but one of the
        # target type would; only other types are used, so the goal stays unmet at the start.
        where = _holders(layout, kind)
        if where:
            place(kind, where)
    return Scene(receptacles, tuple(objects))


def problem_pddl(name: str, task_type: str, params: Params, scene: Scene) -> str:
    """The PDDL problem of a scene, in the shape ALFWorld's ``state_to_pddl`` writes."""
    c = _constants()
    otypes = sorted({kind for kind, _, _ in scene.objects})
    rtypes = sorted({kind for kind, _ in scene.receptacles})
    objects = ["agent1 - agent", "loc_bar_start - location"]
    objects += [f"{rid} - receptacle" for _, rid in scene.receptacles]
    objects += [f"loc_bar_{n} - location" for n in range(1, len(scene.receptacles) + 1)]
    objects += [f"{oid} - object" for _, oid, _ in scene.objects]
    objects += [f"{t}Type - otype" for t in otypes] + [f"{t}Type - rtype" for t in rtypes]
    init = ["(atLocation agent1 loc_bar_start)"]
    for n, (kind, rid) in enumerate(scene.receptacles, start=1):
        init += [f"(receptacleType {rid} {kind}Type)", f"(receptacleAtLocation {rid} loc_bar_{n})"]
        if kind in c.OPENABLE_CLASS_SET:
            init.append(f"(openable {rid})")
    for kind, oid, where in scene.objects:
        init += [f"(objectType {oid} {kind}Type)", f"(inReceptacle {oid} {where})"]
        if kind in _LAMPS:
            init.append(f"(toggleable {oid})")
        else:
            init.append(f"(pickupable {oid})")
        for ability, predicate in (("Cleanable", "cleanable"), ("Heatable", "heatable"),
                                   ("Coolable", "coolable")):
            if kind in c.VAL_ACTION_OBJECTS[ability]:
                init.append(f"({predicate} {oid})")
    # Without canContain facts PutObject can never fire and the goal is unreachable.
    init += [f"(canContain {r}Type {o}Type)" for r in rtypes for o in otypes
             if o in c.VAL_RECEPTACLE_OBJECTS.get(r, ())]
    goal = str(_goal_library().gdict[task_type]["pddl"]).format(
        obj=params.object_target, recep=params.parent_target, toggle=params.toggle_target,
        mrecep="").replace("#", "-")
    lines = [f"(define (problem {name})", "(:domain alfred)", "(:objects",
             *(f"    {o}" for o in objects), ")", "(:init", *(f"    {f}" for f in init), ")"]
    return "\n".join(lines) + "\n" + goal.strip() + "\n"


# Rooms that support a task type are scarcest for these, so they choose rooms first.
_ORDER = ("pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
          "look_at_obj_in_light", "pick_clean_then_place_in_recep",
          "pick_two_obj_and_place", "pick_and_place_simple")


def generate_games(seed: int, per_type: int, task_types: Sequence[str] = TASK_TYPES,
                   max_receptacles: int = 12) -> list[dict[str, Any]]:
    """``per_type`` solved games of each task type, each in a room of its own (so a split by
    room never separates a game from its room), deterministic for ``seed``.

    Every game is solved by the engine's planner; the walkthrough is kept as the reference
    solution. A game the planner cannot solve raises :class:`DataError` naming the seed.
    """
    from skillgrad.envs.household.engine import game_data, solve

    unknown = sorted(set(task_types) - set(TASK_TYPES))
    if unknown:
        raise ConfigError(f"unknown task types {unknown}; known: {', '.join(TASK_TYPES)}")
    layouts = {room: load_layout(room) for room in room_names()}
    used: set[str] = set()
    games: list[dict[str, Any]] = []
    for task_type in [t for t in _ORDER if t in task_types]:
        rng = random.Random(f"{seed}|{task_type}")
        rooms = [r for r in layouts if r not in used and candidates(task_type, layouts[r])]
        if len(rooms) < per_type:
            raise DataError(f"seed {seed}: only {len(rooms)} unused rooms support {task_type}, "
                            f"{per_type} asked")
        for room in sorted(rng.sample(rooms, per_type), key=lambda r: int(r[9:])):
            used.add(room)
            game_rng = random.Random(f"{seed}|{task_type}|{room}")
            params = game_rng.choice(candidates(task_type, layouts[room]))
            scene = build_scene(task_type, params, layouts[room], game_rng, max_receptacles)
            game_id = f"{task_type}-{room}-s{seed}"
            goal = goal_text(task_type, params, game_rng)
            problem = problem_pddl(game_id.replace("-", "_"), task_type, params, scene)
            walkthrough = solve(game_data(problem, goal), f"seed {seed}, game {game_id}")
            games.append({"id": game_id, "room": room, "task_type": task_type,
                          "params": {"object_target": params.object_target,
                                     "parent_target": params.parent_target,
                                     "toggle_target": params.toggle_target},
                          "goal": goal, "seed": seed, "walkthrough": walkthrough,
                          "pddl_problem": problem})
    games.sort(key=lambda g: (TASK_TYPES.index(g["task_type"]), int(g["room"][9:])))
    return games
