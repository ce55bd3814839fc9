"""English stop words: the function words that word-level matching leaves out (search
tokenizers, content-word tests, clustering by words).

:data:`STOP_WORDS` is the shared list. :data:`FUNCTION_WORDS` extends it with auxiliaries,
pronouns and conjunctions, for text whose content words alone should count. Each user takes
one of them and names what it adds or leaves out, so the differences between users stay in
sight. :data:`QUESTION_WORDS` are the wh-words, a group some users add.

This module imports nothing from the package, so any module may use it.
"""

from __future__ import annotations

import re

# Articles, the commonest prepositions and conjunctions, "be", "it", "this", the first person.
STOP_WORDS = frozenset("""a an and are as at be by for from i in is it its me my of on or that
the this to was were with""".split())

# The shared list plus auxiliaries, the other pronouns and conjunctions.
FUNCTION_WORDS = STOP_WORDS | frozenset("""been being but can could did do does he if no not
our she should so then these they those we will would you your""".split())

QUESTION_WORDS = frozenset("how what when where which who whom whose why".split())

_WORD = re.compile(r"[a-z0-9]+")
_DIGIT_GROUP = re.compile(r"(?<=\d)[,_](?=\d{3}\b)")


def words(text: str) -> list[str]:
    """Lowercase words and numbers (26,100 reads as 26100)."""
    return _WORD.findall(_DIGIT_GROUP.sub("", text.casefold()))


def content_words(text: str) -> set[str]:
    """The words of ``text`` that carry its content (function words left out)."""
    return {w for w in words(text) if w not in FUNCTION_WORDS}


def stem(word: str) -> str:
    """``word`` without the "s" of a plural or of a verb's third person, for matching texts
    that say the same thing in another person or number: "knows" reads as "know", "answers"
    as "answer", "replies" as "reply". Words of three letters or fewer, and endings "ss", "us"
    and "is" ("class", "focus", "analysis"), are kept as they are."""
    if len(word) <= 3 or not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return word
    return word[:-3] + "y" if word.endswith("ies") and len(word) > 4 else word[:-1]


def stems(text: str) -> set[str]:
    """The content words of ``text`` (:func:`content_words`), each as its :func:`stem`."""
    return {stem(w) for w in content_words(text)}


def cased(text: str, like: str) -> str:
    """``text`` with its first letter in the case of ``like``'s: a word put in place of another
    at the start of a sentence starts it with a capital."""
    return text[:1].upper() + text[1:] if like[:1].isupper() else text
