"""The ``reading`` environment (:mod:`.env`): one Wikipedia paragraph and one question about
it, answered in one reply (SQuAD reading comprehension), with its shipped ``skill.md``; the
data is ``open_qa``'s bundled SQuAD subset."""

from skillgrad.envs.reading.env import ReadingEnvironment, ReadingOptions, load_reading, spread

__all__ = ["ReadingEnvironment", "ReadingOptions", "load_reading", "spread"]
