"""A scripted agent model for the LangChain/LangGraph hook tests: LangChain's own
GenericFakeChatModel, whose script reads what the model was sent, so that it can change its
call once eddy's message is in its input."""
import itertools

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from pydantic import Field


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's GenericFakeChatModel, whose script can read what the model was sent."""

    sent: list = Field(default_factory=list)

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.sent.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def search(query, i):
    return AIMessage(content="", tool_calls=[{"name": "web_search", "args": {"query": query},
                                              "id": f"call_{i}"}])


def told_by_eddy(messages):
    return any(getattr(m, "name", None) == "eddy" for m in messages)


def agent_model(heeds: bool) -> ScriptedChatModel:
    """Searches the same thing over and over; when `heeds`, changes its search once the last
    input carries eddy's message, then answers."""
    model = ScriptedChatModel(messages=iter(()))

    def script():
        for i in itertools.count():
            if heeds and told_by_eddy(model.sent[-1]):
                yield search("eddy changelog", i)
                yield AIMessage(content="eddy 1.0 came out on 2026-03-02.")
                return
            yield search("eddy release date", i)

    model.messages = script()
    return model


