"""Model backends and the shared client layer around them."""

from skillgrad.models.base import ChatModel
from skillgrad.models.scripted import ScriptedModel

__all__ = ["ChatModel", "ScriptedModel"]
