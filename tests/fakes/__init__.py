"""Test doubles for the LLM optimizer: a scripted chat model and a fake OpenAI-compatible server.

Neither touches the network beyond 127.0.0.1; both record what they were sent so tests can
assert on prompts, headers and request bodies.
"""

from .chat import ScriptedChatModel
from .openai_server import FakeOpenAIServer, Reply, chat_completion

__all__ = ["FakeOpenAIServer", "Reply", "ScriptedChatModel", "chat_completion"]
