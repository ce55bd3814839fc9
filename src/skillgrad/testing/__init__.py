"""Test doubles shipped with the library: scripted stand-ins for the target and the optimizer
(:mod:`.doubles`, routed by request kind) and a loopback OpenAI-compatible server for real-HTTP
tests and overhead benchmarks (:mod:`.openai_server`). The scripted model itself lives in
:mod:`skillgrad.models.scripted`."""

from skillgrad.testing.doubles import (
    CONCISE_RULE,
    YEAR_RULE,
    FailureAnalyst,
    edits_in_prompt,
    http_responder,
    kind_of_prompt,
    make_reader,
    reader_failures,
    reader_optimizer,
    scripted_optimizer,
)
from skillgrad.testing.openai_server import FakeOpenAIServer, Fault, completion_body

__all__ = ["CONCISE_RULE", "YEAR_RULE", "FailureAnalyst", "FakeOpenAIServer", "Fault",
           "completion_body", "edits_in_prompt", "http_responder", "kind_of_prompt", "make_reader",
           "reader_failures", "reader_optimizer", "scripted_optimizer"]
