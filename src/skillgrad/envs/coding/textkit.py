"""The source of ``textkit``, one of the two repositories the ``coding`` tasks work in: small
text helpers (case, slugs, wrapping, counts, lines) with stdlib ``unittest`` tests.

Its conventions, which the tasks check and the repository does not spell out: every public
function has a docstring that names its keyword arguments; every public function is listed
in its module's ``__all__``; new behaviour gets a test in ``tests/test_<module>.py``; a bug
fix gets its test in ``tests/test_regressions.py`` and leaves the existing test files as they
are; every change gets a line under ``## Unreleased`` in ``CHANGELOG.md``. It holds four
small bugs on purpose (the ``fix`` tasks): ``title_case``, ``unique_slug``, ``truncate`` and
``line_at``.
"""

from __future__ import annotations

FILES: dict[str, str] = {}

FILES[".gitignore"] = """__pycache__/
*.pyc
"""

FILES["README.md"] = """# textkit

Small helpers for text: case, slugs, wrapping, counting and lines.

Run the tests with `python3 -m unittest`.
"""

FILES["CHANGELOG.md"] = """# Changelog

## Unreleased

## 1.2.0 (2024-02-27)

- Added `lines.line_at`.
- `slug.slugify` takes a separator.

## 1.1.0 (2023-11-30)

- Added `wrap.truncate`.
"""

FILES["textkit/__init__.py"] = '''"""textkit: small helpers for text."""
'''

FILES["textkit/case.py"] = r'''"""Changing the case of words."""

import re

__all__ = ["camel_case", "snake_case", "title_case"]

SMALL_WORDS = frozenset({"a", "an", "and", "at", "by", "for", "in", "of", "on", "or", "the",
                         "to"})


def _words(text):
    """The words of text: runs of letters and digits, also split where a capital starts."""
    return re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", text)


def snake_case(text):
    """'Hello World' or 'helloWorld' -> 'hello_world'."""
    return "_".join(word.lower() for word in _words(text))


def camel_case(text):
    """'hello world' -> 'helloWorld'."""
    words = [word.lower() for word in _words(text)]
    if not words:
        return ""
    return words[0] + "".join(word.capitalize() for word in words[1:])


def title_case(text):
    """Every word capitalised except the small words (of, the, ...), which stay in lower case
    unless they come first: 'the lord of the rings' -> 'The Lord of the Rings'."""
    words = text.split()
    return " ".join(word.lower() if word.lower() in SMALL_WORDS else word.capitalize()
                    for word in words)
'''

FILES["textkit/slug.py"] = r'''"""Slugs for URLs."""

import re

__all__ = ["slugify", "unique_slug"]


def slugify(text, sep="-"):
    """The lower-case words of text joined by `sep`: 'Hello, World!' -> 'hello-world'."""
    return sep.join(re.findall(r"[a-z0-9]+", text.lower()))


def unique_slug(slug, taken):
    """slug itself when it is free; else slug-2, slug-3, ..., the first that is not taken."""
    if slug not in taken:
        return slug
    number = 1
    while f"{slug}-{number}" in taken:
        number += 1
    return f"{slug}-{number}"
'''

FILES["textkit/wrap.py"] = r'''"""Shortening and wrapping text."""

__all__ = ["truncate", "wrap_words"]


def truncate(text, width, ellipsis="..."):
    """text cut to at most `width` characters, the ellipsis included, when it is longer."""
    if len(text) <= width:
        return text
    return text[:width] + ellipsis


def wrap_words(text, width):
    """The words of text in lines of at most `width` characters (a longer word gets a line
    of its own)."""
    lines, current = [], ""
    for word in text.split():
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        lines.append(current)
    return lines
'''

FILES["textkit/counts.py"] = r'''"""Counting words and characters."""

__all__ = ["char_frequency", "longest_word", "word_count"]


def word_count(text):
    """The number of words (separated by whitespace)."""
    return len(text.split())


def char_frequency(text):
    """How often each character other than whitespace occurs."""
    counts = {}
    for char in text:
        if not char.isspace():
            counts[char] = counts.get(char, 0) + 1
    return counts


def longest_word(text):
    """The longest word (the first of equally long ones); '' when there is none."""
    return max(text.split(), key=len, default="")
'''

FILES["textkit/lines.py"] = r'''"""Working with the lines of a text."""

__all__ = ["indent_lines", "line_at", "nonblank_lines"]


def nonblank_lines(text):
    """The lines that hold more than whitespace."""
    return [line for line in text.splitlines() if line.strip()]


def indent_lines(text, prefix="    "):
    """Every line of text with `prefix` in front."""
    return "\n".join(prefix + line for line in text.splitlines())


def line_at(text, number):
    """Line `number` of text, counting from 1."""
    return text.splitlines()[number]
'''

FILES["tests/__init__.py"] = ""

FILES["tests/test_case.py"] = r'''import unittest

from textkit.case import camel_case, snake_case, title_case


class CaseTests(unittest.TestCase):
    def test_snake_case(self):
        self.assertEqual(snake_case("Hello World"), "hello_world")
        self.assertEqual(snake_case("helloWorld"), "hello_world")

    def test_camel_case(self):
        self.assertEqual(camel_case("hello big world"), "helloBigWorld")

    def test_title_case_keeps_small_words_low(self):
        self.assertEqual(title_case("war and peace"), "War and Peace")
'''

FILES["tests/test_slug.py"] = r'''import unittest

from textkit.slug import slugify, unique_slug


class SlugTests(unittest.TestCase):
    def test_slugify(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")
        self.assertEqual(slugify("Hello World", sep="_"), "hello_world")

    def test_unique_slug_when_free(self):
        self.assertEqual(unique_slug("post", set()), "post")
'''

FILES["tests/test_wrap.py"] = r'''import unittest

from textkit.wrap import truncate, wrap_words


class WrapTests(unittest.TestCase):
    def test_truncate_leaves_short_text(self):
        self.assertEqual(truncate("short", 10), "short")

    def test_wrap_words(self):
        self.assertEqual(wrap_words("one two three four", 9), ["one two", "three", "four"])
'''

FILES["tests/test_counts.py"] = r'''import unittest

from textkit.counts import char_frequency, longest_word, word_count


class CountTests(unittest.TestCase):
    def test_word_count(self):
        self.assertEqual(word_count("one two  three"), 3)

    def test_char_frequency(self):
        self.assertEqual(char_frequency("a b a"), {"a": 2, "b": 1})

    def test_longest_word(self):
        self.assertEqual(longest_word("a bb cc"), "bb")
'''

FILES["tests/test_lines.py"] = r'''import unittest

from textkit.lines import indent_lines, nonblank_lines


class LineTests(unittest.TestCase):
    def test_nonblank_lines(self):
        self.assertEqual(nonblank_lines("a\n\n  \nb"), ["a", "b"])

    def test_indent_lines(self):
        self.assertEqual(indent_lines("a\nb", "> "), "> a\n> b")
'''

FILES["tests/test_regressions.py"] = r'''"""One test for each bug fixed, so that it stays fixed."""

import unittest

from textkit.wrap import wrap_words


class RegressionTests(unittest.TestCase):
    def test_wrap_words_puts_a_long_word_on_its_own_line(self):
        self.assertEqual(wrap_words("a verylongword b", 4), ["a", "verylongword", "b"])
'''
