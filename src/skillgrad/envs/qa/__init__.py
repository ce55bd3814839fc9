"""Single-turn question answering: ``qa`` (the user's JSON / JSONL records, :mod:`.env`) and
``searchqa`` (SearchQA's materialised layout, the same task with snippets as context,
:mod:`.searchqa`). Both ship ``skill.md``."""

from skillgrad.envs.qa.env import QAEnvironment, QAOptions, QARecord, load_qa_records, parse_record
from skillgrad.envs.qa.searchqa import SearchQAEnvironment, SearchQAOptions

__all__ = ["QAEnvironment", "QAOptions", "QARecord", "SearchQAEnvironment", "SearchQAOptions",
           "load_qa_records", "parse_record"]
