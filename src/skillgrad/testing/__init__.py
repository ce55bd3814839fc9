"""Test doubles shipped with the library: a loopback OpenAI-compatible server for real-HTTP
tests and overhead benchmarks (the scripted model lives in :mod:`skillgrad.models.scripted`)."""

from skillgrad.testing.openai_server import FakeOpenAIServer, Fault, completion_body

__all__ = ["FakeOpenAIServer", "Fault", "completion_body"]
