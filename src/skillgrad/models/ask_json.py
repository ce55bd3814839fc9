"""Structured (JSON) answers from the optimizer model.

The request carries a JSON schema, which backends with structured output enforce. Replies are
still parsed tolerantly (code fences, surrounding prose, small syntax slips), validated against
the expected shape, and, if that fails, the model is asked once more with the parse error shown.

A reply cut off by the token limit, or one that ran away (repeated one sentence or phrase over
and over, see :func:`find_runaway`), is never used. It is retried once, differently: the model
is told what went wrong, sees only the start of its reply, and is asked at a temperature of at
least :data:`RETRY_TEMPERATURE` so that a greedy loop does not come back word for word. A reply
that was only cut off is also given room to finish: twice the token limit, up to
:data:`RETRY_MAX_TOKENS`. If that reply is cut off too, it is dropped and the drop is counted
(``cut_off_dropped`` of the stage, through :class:`~skillgrad.models.base.Metered`). The retry
depends only on the replies, so a recorded run replays.
(Over the house limit of ~400 lines: the refusal of a runaway reply and the repair of a
JSON one decide together whether a reply is retried, so they stay beside each other.)
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import json_repair
from pydantic import BaseModel, ValidationError

from skillgrad.models.base import ChatModel, Metered
from skillgrad.models.messages import ChatRequest, Completion, Message

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class JsonReply(Generic[T]):
    """``value`` when the reply parsed; otherwise ``error``. ``raw`` (the last reply) is always
    kept. ``retried`` is why a second attempt was made (the first reply's problem), or None."""

    value: T | None
    raw: str
    error: str | None = None
    attempts: int = 1
    retried: str | None = None


# ----------------------------------------------------------------------------- runaway replies

# Exact repetition: a unit of 1 to _MAX_UNIT characters written out at least _MIN_COPIES times
# in a row, covering at least _MIN_SPAN characters (_MIN_SPAN_BARE for a unit without letters:
# indentation, rules of dashes, a list of numbers). Five copies of one sentence in a row is
# never what a prompt asks for; 200 characters keeps short echoes ("no, no, no") out.
_MAX_UNIT = 500
_MIN_COPIES = 5
_MIN_SPAN = 200
_MIN_SPAN_BARE = 400
# The same with every digit read as 0 (a counting loop: "Step 1: check ... Step 2: check ..."),
# where honest lists of numbered items are likelier, so more is needed.
_MIN_COPIES_COUNTING = 10
_MIN_SPAN_COUNTING = 400
_TANDEM = re.compile(rf"(.{{1,{_MAX_UNIT}}}?)\1{{{_MIN_COPIES - 1},}}", re.DOTALL)
_DIGITS_AS_ZERO = str.maketrans("0123456789", "0" * 10)
_LETTER = re.compile(r"[^\W\d_]")
# Low diversity (a loop with variations): in some window of _WINDOW words, under _MIN_DISTINCT
# of the 3-word sequences are distinct. Prose and JSON replies stay above 0.4 (keys and shared
# phrases included); a loop of one to three short sentences is near 0.05-0.15.
_WORD = re.compile(r"[^\W_]+")
_WINDOW = 200
_WINDOW_STEP = 50
_MIN_WORDS = 120
_MIN_DISTINCT = 0.2
_SCAN = 50_000  # only the last this many characters are examined (bounds the cost)
_SENTENCE_END = re.compile(r"[.!?](?:\s+|$)|\n|\\n")
_ESCAPE = re.compile(r'\\[nrt"\\]')
_UNESCAPE = {"\\n": " ", "\\r": " ", "\\t": " ", '\\"': '"', "\\\\": "\\"}

RETRY_TEMPERATURE = 0.7
# The most completion tokens a retry of a cut-off reply is given (twice the limit, up to this):
# room to finish a long JSON reply without asking a small context window for the impossible.
RETRY_MAX_TOKENS = 8192
_SHOWN = 400  # characters of a runaway or cut-off reply shown back to the model
_CUT_OFF = "reply was cut off"


@dataclass(frozen=True)
class _Runaway:
    description: str
    clean_end: int  # where the reply stops being worth showing back (after the first copy)


def find_runaway(text: str) -> str | None:
    """What makes ``text`` a runaway (degenerate repetition), in a few words; None if it is not.

    Flagged: one unit (sentence, line, phrase, JSON object) written out many times in a row, the
    same counting up ("Step 1 ... Step 2 ..."), or a stretch of a few phrases in varying order.
    Not flagged: repeated keys, shared wording across different items, a phrase said twice."""
    found = _find_runaway(text)
    return found.description if found else None


def is_runaway(text: str) -> bool:
    """Whether ``text`` repeats itself degenerately (see :func:`find_runaway`)."""
    return _find_runaway(text) is not None


def _find_runaway(text: str) -> _Runaway | None:
    offset = max(0, len(text) - _SCAN)
    scanned = text[offset:]
    counting = scanned.translate(_DIGITS_AS_ZERO)
    regions = _repeating_regions(counting)
    found = (_tandem(scanned, scanned, regions, _MIN_COPIES, _MIN_SPAN, _MIN_SPAN_BARE)
             or _tandem(scanned, counting, regions, _MIN_COPIES_COUNTING, _MIN_SPAN_COUNTING,
                        _MIN_SPAN_COUNTING)
             or _low_diversity(scanned))
    if found is None or not offset:
        return found
    return _Runaway(found.description, found.clean_end + offset)


_GRAM = 16


def _repeating_regions(text: str) -> list[tuple[int, int]]:
    """Where ``text`` may hold a tandem repeat worth a regex search (which is slow to run over
    a whole reply): stretches where every 16-character piece also occurs at most _MAX_UNIT
    characters before. A repeat of ``copies`` units covering ``span`` characters makes such a
    stretch of at least ``span * (1 - 1/copies) - 15`` positions; shorter ones are dropped."""
    shortest = int(_MIN_SPAN * (1 - 1 / _MIN_COPIES)) - _GRAM + 1
    last: dict[str, int] = {}
    regions: list[tuple[int, int]] = []
    run_start = -1
    for i in range(len(text) - _GRAM + 1):
        piece = text[i : i + _GRAM]
        seen = last.get(piece)
        last[piece] = i
        if seen is not None and i - seen <= _MAX_UNIT:
            if run_start < 0:
                run_start = i
            continue
        if run_start >= 0 and i - run_start >= shortest:
            regions.append((max(0, run_start - _MAX_UNIT), i + _GRAM))
        run_start = -1
    end = len(text) - _GRAM + 1
    if run_start >= 0 and end - run_start >= shortest:
        regions.append((max(0, run_start - _MAX_UNIT), len(text)))
    return regions


def _tandem(text: str, searched: str, regions: list[tuple[int, int]], copies: int, span: int,
            bare_span: int) -> _Runaway | None:
    best: tuple[int, int, int] | None = None  # (covered, start, unit length)
    for lo, hi in regions:
        for m in _TANDEM.finditer(searched, lo, hi):
            unit, covered = m.group(1), m.end() - m.start()
            needed = span if _LETTER.search(unit) else bare_span
            if (covered // len(unit) >= copies and covered >= needed
                    and (best is None or covered > best[0])):
                best = (covered, m.start(), len(unit))
    if best is None:
        return None
    covered, start, size = best
    unit = _readable(text[start : start + size])
    return _Runaway(f"{_quote(unit)} repeated {covered // size} times", start + size)


def _readable(unit: str) -> str:
    """A repeated unit as a reader would name it: starting after a sentence end, stripped."""
    m = _SENTENCE_END.search(unit)
    if m and 0 < m.end() < len(unit):
        unit = unit[m.end() :] + unit[: m.end()]
    return unit.strip() or unit


def _low_diversity(text: str) -> _Runaway | None:
    words = list(_WORD.finditer(text))
    if len(words) < _MIN_WORDS:
        return None
    lower = [w.group().lower() for w in words]
    last = max(0, len(lower) - _WINDOW)  # the last window ends with the text
    for start in [*range(0, last, _WINDOW_STEP), last]:
        window = lower[start : start + _WINDOW]
        grams = list(zip(window, window[1:], window[2:], strict=False))
        share = len(set(grams)) / len(grams)
        if share < _MIN_DISTINCT:
            begin = words[start].start()
            what = f"a few phrases over and over (only {share:.0%} of the 3-word sequences in " \
                   f"{len(window)} words are distinct)"
            common = _commonest_sentence(text[begin:])
            if common:
                what += f", e.g. {_quote(common)}"
            return _Runaway(what, begin)
    return None


def _commonest_sentence(text: str) -> str | None:
    counts: Counter[tuple[str, ...]] = Counter()
    first: dict[tuple[str, ...], str] = {}
    for piece in _SENTENCE_END.split(text):
        key = tuple(w.lower() for w in _WORD.findall(piece) if not w.isdigit())
        if len(key) >= 3:
            counts[key] += 1
            first.setdefault(key, piece.strip())
    if not counts:
        return None
    key, n = counts.most_common(1)[0]
    return first[key] if n >= 2 else None


def _quote(text: str, limit: int = 80) -> str:
    """``text`` quoted for a message: JSON escapes read, whitespace collapsed, clipped."""
    text = " ".join(_ESCAPE.sub(lambda m: _UNESCAPE[m.group()], text).split())
    if not text:
        return "whitespace"
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


# A model writing LaTeX inside a JSON string seldom doubles its backslashes, and "\boxed",
# "\frac", "\times" or "\neq" then decode to a backspace, a form feed, a tab or a newline
# followed by the command's tail. A backspace or form feed is never meant in a reply, and the
# other three only before these command tails, so such characters are read back as the
# backslash commands they were.
_LATEX_SLIP = re.compile(
    r"[\b\f]"
    r"|\t(?=imes|ext|heta|frac|ilde|riangle|au(?![a-z])|an(?![a-z]))"
    r"|\r(?=ight|ho(?![a-z])|angle|ceil|floor|m(?![a-z]))"
    r"|\n(?=eq(?![a-z])|abla|eg(?![a-z])|ewline|ot(?![a-z]))")
_SLIPPED = {"\b": "\\b", "\f": "\\f", "\t": "\\t", "\r": "\\r", "\n": "\\n"}


def _restore_latex(value: Any) -> Any:
    if isinstance(value, str):
        return _LATEX_SLIP.sub(lambda m: _SLIPPED[m.group()], value)
    if isinstance(value, list):
        return [_restore_latex(v) for v in value]
    if isinstance(value, dict):
        return {k: _restore_latex(v) for k, v in value.items()}
    return value


def extract_json(text: str) -> object:
    """The JSON object in ``text``, tolerating fences, prose around it and small slips
    (among them LaTeX commands whose backslash was read as a JSON escape)."""
    return _restore_latex(_decode(text))


def _decode(text: str) -> object:
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    if start < 0:
        raise ValueError("the reply contains no JSON object")
    repaired = json_repair.loads(text[start:])
    if not isinstance(repaired, dict) or not repaired:
        raise ValueError("the reply is not a JSON object")
    return repaired


def parse_as(text: str, shape: type[T]) -> T:
    data = extract_json(text)
    try:
        return shape.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "top level"
        raise ValueError(f"{where}: {first['msg']}") from None


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every property of every object required.

    The shapes parse leniently (missing keys get defaults), but a grammar-constrained model
    only writes what the schema requires; requiring every key makes it fill them all in.
    """
    return _require_all(schema)  # type: ignore[no-any-return]


def _require_all(node: Any) -> Any:
    if isinstance(node, list):
        return [_require_all(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _require_all(v) for k, v in node.items()}
    if out.get("type") == "object" and isinstance(out.get("properties"), dict):
        out["required"] = list(out["properties"])
    return out


def ask_json(
    model: ChatModel,
    messages: list[Message],
    shape: type[T],
    *,
    kind: str,
    max_tokens: int | None = None,
    temperature: float | None = None,
    schema: dict[str, Any] | None = None,
) -> JsonReply[T]:
    """Ask for a JSON object of ``shape``; at most one retry; never raises on a bad reply.

    ``kind`` names the call (its prompt); ``schema`` (default: ``shape``'s, every key required)
    is what the request asks the model for; it may be narrower than ``shape`` (an enum of
    allowed anchors, say).

    A reply that runs away or is cut off at the token limit is not used, even if it parses; the
    retry names the problem, shows the start of the reply and raises the temperature to at
    least :data:`RETRY_TEMPERATURE`; a cut-off one is also given twice the token limit (see
    :func:`more_room`). A reply that is not JSON of the expected shape is retried with the
    parse error shown. The second reply is used only if it has none of these problems; one
    still cut off is counted as dropped (``cut_off_dropped``).
    """
    schema = schema or strict_schema(shape.model_json_schema())
    raw = ""
    problem = ""
    retried: str | None = None
    for attempt in (1, 2):
        request = ChatRequest(
            messages=tuple(messages), max_tokens=max_tokens, temperature=temperature,
            json_schema=schema, kind=kind,
        )
        completion = model.complete(request)
        raw = completion.text
        runaway = _find_runaway(raw)
        if runaway is None and not completion.truncated:
            try:
                return JsonReply(parse_as(raw, shape), raw, None, attempt, retried)
            except ValueError as exc:
                problem = f"reply is not valid JSON of the expected shape: {exc}"
            if attempt == 1:
                retried = problem
                messages = [
                    *messages,
                    Message(role="assistant", content=raw),
                    Message(role="user", content=f"That reply could not be used ({problem}). "
                            "Reply again with only the JSON object."),
                ]
            continue
        problem, note, shown, room = _cut_or_runaway(completion, runaway, max_tokens)
        if attempt == 1:
            retried = problem
            messages = [
                *messages,
                Message(role="assistant", content=(shown.rstrip() + " [...]").lstrip()),
                Message(role="user", content=f"{note} Write each point once and keep every "
                        "field short; reply with only the JSON object."),
            ]
            temperature = max(temperature or 0.0, RETRY_TEMPERATURE)
            max_tokens = room or max_tokens
    if problem.startswith(_CUT_OFF) and isinstance(model, Metered):
        model.count_outcome("cut_off_dropped")
    return JsonReply(None, raw, _final_error(problem, retried), 2, retried)



def _cut_or_runaway(completion: Completion, runaway: _Runaway | None, max_tokens: int | None
                    ) -> tuple[str, str, str, int | None]:
    """What is wrong with a reply that ran away or was cut off: the problem (for the record),
    the note that tells the model, the start of the reply shown back to it, and the larger
    token limit a retry gets (a reply that was only cut off: :func:`more_room`)."""
    raw = completion.text
    if runaway is not None:
        until = " until the token limit" if completion.truncated else ""
        return (f"runaway (repeated text): {runaway.description}{until}",
                f"Your reply repeated itself ({runaway.description}){until} and could not be "
                "used.", raw[: min(runaway.clean_end, _SHOWN)], None)
    limit = f" ({max_tokens} tokens)" if max_tokens else ""
    note = f"Your reply was too long: it was cut off at the token limit{limit}."
    room = more_room(max_tokens, completion)
    if room is not None:
        note += f" This time you have {room} tokens."
    return f"{_CUT_OFF} at the token limit{limit}", note, raw[:_SHOWN], room


def more_room(max_tokens: int | None, completion: Completion) -> int | None:
    """The completion limit a retry of a cut-off reply gets: twice the one it was cut off at
    (the reply's own length when no limit was sent), at most :data:`RETRY_MAX_TOKENS`; ``None``
    when that is no more than before (the retry then has the same limit)."""
    base = max_tokens or completion.usage.completion_tokens
    room = min(2 * base, RETRY_MAX_TOKENS)
    return room if room > (max_tokens or base) and base > 0 else None


def _final_error(problem: str, first: str | None) -> str:
    """The last reply's problem, and the first one's when it differs in kind."""
    if first is None or _head(first) == _head(problem):
        return problem
    kinds = {"runaway (repeated text)": "ran away (repeated text)",
             "reply is not valid JSON of the expected shape": "was not valid JSON"}
    return f"{problem}; the first reply {kinds.get(_head(first), 'was too long')}"


def _head(problem: str) -> str:
    """The kind of a problem: its text before the details (a cut-off's limit included)."""
    return _CUT_OFF if problem.startswith(_CUT_OFF) else problem.split(":")[0]
