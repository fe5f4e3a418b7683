"""A LangChain chat model that answers from a script and records every call.

    model = ScriptedChatModel(["Approach: tiles\\n```cuda\\n...\\n```", RateLimitLike("429"), "..."])
    model.invoke(messages)        # -> AIMessage with the first scripted answer
    model.calls[0]                # the list of BaseMessages of the first call

A scripted string becomes an AIMessage with usage_metadata (counts derived from the text
lengths unless fixed with `prompt_tokens` / `completion_tokens`); a scripted exception is
raised; a scripted AIMessage is returned as it is. Running out of script is an AssertionError,
so a test that calls the model more often than it meant to fails loudly.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field


class ScriptedChatModel(BaseChatModel):
    responses: list[Any] = Field(default_factory=list)  # str | Exception | AIMessage, in call order
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    prompt_tokens: int | None = None  # fixed input token count per call (default: prompt chars / 4)
    completion_tokens: int | None = None  # fixed output token count per call (default: answer chars / 4)
    model_name: str = "scripted-model"
    finish_reason: str = "stop"

    def __init__(self, responses: list[Any] | None = None, **kwargs: Any) -> None:
        super().__init__(responses=list(responses or []), **kwargs)

    @property
    def remaining(self) -> int:
        """Scripted responses not used yet."""
        return len(self.responses) - len(self.calls)

    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        index = len(self.calls)
        self.calls.append(list(messages))
        if index >= len(self.responses):
            raise AssertionError(f"ScriptedChatModel: call {index + 1} but only {len(self.responses)} response(s) scripted")
        item = self.responses[index]
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, AIMessage):
            return ChatResult(generations=[ChatGeneration(message=item)])
        text = str(item)
        prompt_chars = sum(len(m.content) if isinstance(m.content, str) else len(str(m.content)) for m in messages)
        input_tokens = self.prompt_tokens if self.prompt_tokens is not None else max(1, prompt_chars // 4)
        output_tokens = self.completion_tokens if self.completion_tokens is not None else max(1, len(text) // 4)
        message = AIMessage(
            content=text,
            usage_metadata={"input_tokens": input_tokens, "output_tokens": output_tokens,
                            "total_tokens": input_tokens + output_tokens},
            response_metadata={"model_name": self.model_name, "finish_reason": self.finish_reason},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
