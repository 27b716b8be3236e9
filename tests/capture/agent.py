"""A scripted coding-agent session through the official Anthropic and OpenAI SDKs.

The main agent makes six turns with tool results (one resent as a retry, one not streamed),
spawns two subagents that run in parallel (three turns each) after its third turn and joins
them at its fourth; a title call (classifier-sized) and a call to a missing model come first.
Everything sent is kept so tests can compare the export with what really happened.
"""

from __future__ import annotations

import asyncio
import copy
import random
from dataclasses import dataclass, field

import anthropic
import openai

from tests.capture.tokenizer import words

SECRETS = {"api_key": "sk-agentx-SECRET-KEY-1f3a9c", "cookie": "sessioncookie-SECRET-77b2",
           "body_field": "body-field-SECRET-91d0"}
TOOLS = {"ReadFileTool": "Read a file of the repository", "RunShellTool": "Run a shell command",
         "SpawnAgentTool": "Start a subagent on a subtask"}
MAX_TOKENS = 40


@dataclass
class Sent:
    stream: str  # main, sub-a, sub-b, title, failed
    body: dict  # the JSON body as sent (without the stream flag)
    output_tokens: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    stop: str | None = None
    retried: bool = False  # this request was sent again as it is


@dataclass
class Script:
    style: str  # anthropic or openai
    session_id: str
    sent: list[Sent] = field(default_factory=list)
    contents: list[str] = field(default_factory=list)  # texts that must never reach an export

    def of(self, stream: str) -> list[Sent]:
        return [s for s in self.sent if s.stream == stream and not s.retried]


def _text(rng: random.Random, tag: str, n: int) -> str:
    return f"{tag} " + words(rng, n)


class _Agent:
    """What the two API styles share: the session's shape. Subclasses speak one API."""

    style = ""

    def __init__(self, base_url: str, model: str, session_id: str, seed: int):
        self.model, self.rng = model, random.Random(seed)
        self.script = Script(self.style, session_id)
        self.base_url = base_url

    def secret_text(self, tag: str, n: int) -> str:
        text = _text(self.rng, f"{tag}-{self.rng.randrange(10**9)}", n)
        self.script.contents.append(text.split(" ", 1)[0])
        return text

    async def run(self) -> Script:
        system = self.secret_text(f"{self.style}-main-system", 150)
        task = self.secret_text("task", 40)
        await self.title(task)
        await self.missing_model(task)
        messages, tools, call = [self.user(task)], list(TOOLS), None
        for turn, tool in enumerate(["ReadFileTool", "RunShellTool", "SpawnAgentTool", "ReadFileTool", None, None]):
            if turn == 3:  # join: the two subagents' results come back as the spawn call's result
                results = await asyncio.gather(self.subagent("sub-a"), self.subagent("sub-b"))
                messages.append(self.tool_result(call, "\n".join(results)))
            elif turn == 4:
                messages.append(self.tool_result(call, self.secret_text("file", 800)))
            elif turn == 5:
                messages.append(self.user(self.secret_text("followup", 30)))
            elif turn:
                messages.append(self.tool_result(call, self.secret_text("output", 900)))
            if turn == 3:  # this turn is sent twice, as a client retries after a dropped connection
                await self.call("main", system, messages, tools, tool, retried=True)
            answer, call = await self.call("main", system, messages, tools, tool, streamed=turn != 1)
            messages.append(answer)
        return self.script

    async def subagent(self, name: str) -> str:
        system = self.secret_text(f"{self.style}-sub-system", 120)
        messages = [self.user(self.secret_text(f"{name}-task", 30))]
        tools, call = ["ReadFileTool", "RunShellTool"], None
        for turn, tool in enumerate(["ReadFileTool", "RunShellTool", None]):
            if turn:
                messages.append(self.tool_result(call, self.secret_text(f"{name}-output", 600)))
            answer, call = await self.call(name, system, messages, tools, tool, agent=name)
            messages.append(answer)
        return self.secret_text(f"{name}-result", 40)


class AnthropicAgent(_Agent):
    style = "anthropic"

    def __init__(self, *args):
        super().__init__(*args)
        self.client = anthropic.AsyncAnthropic(
            base_url=self.base_url, api_key=SECRETS["api_key"], max_retries=0,
            default_headers={"X-Claude-Code-Session-Id": self.script.session_id,
                             "Cookie": f"sid={SECRETS['cookie']}"})

    @staticmethod
    def user(text: str) -> dict:
        return {"role": "user", "content": text}

    @staticmethod
    def tool_result(call: dict, text: str) -> dict:
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": text}]}

    async def title(self, task: str) -> None:
        body = {"model": self.model, "max_tokens": 32, "system": "Write a five word title.",
                "messages": [self.user(task)]}
        msg = await self.client.messages.create(**body)
        self.script.sent.append(Sent("title", body, msg.usage.output_tokens))

    async def missing_model(self, task: str) -> None:
        body = {"model": "no-such-model", "max_tokens": 8, "messages": [self.user(task)]}
        try:
            await self.client.messages.create(**body)
        except anthropic.NotFoundError:
            self.script.sent.append(Sent("failed", body))
            return
        raise AssertionError("a missing model was answered")

    async def call(self, stream, system, messages, tools, tool, streamed=True, agent=None, retried=False):
        body = {"model": self.model, "max_tokens": MAX_TOKENS, "system": system, "messages": copy.deepcopy(messages),
                "tools": [{"name": t, "description": TOOLS[t], "input_schema": {"type": "object"}} for t in tools]}
        if tool:
            body["tool_choice"] = {"type": "tool", "name": tool}
        options = {"extra_headers": {"X-Claude-Code-Agent-Id": agent} if agent else None,
                   "extra_body": {"api_key": SECRETS["body_field"]}}
        if streamed:
            async with self.client.messages.stream(**body, **options) as s:
                msg = await s.get_final_message()
        else:
            msg = await self.client.messages.create(**body, **options)
        u = msg.usage
        self.script.sent.append(Sent(stream, body, u.output_tokens, u.input_tokens + u.cache_read_input_tokens,
                                     u.cache_read_input_tokens, msg.stop_reason, retried))
        content = [b.model_dump(mode="json", exclude_none=True) for b in msg.content]
        call = next((b for b in content if b["type"] == "tool_use"), None)
        return {"role": "assistant", "content": content}, call


class OpenAIAgent(_Agent):
    style = "openai"

    def __init__(self, *args):
        super().__init__(*args)
        self.client = openai.AsyncOpenAI(
            base_url=self.base_url + "/v1", api_key=SECRETS["api_key"], max_retries=0,
            default_headers={"session_id": self.script.session_id, "Cookie": f"sid={SECRETS['cookie']}"})

    @staticmethod
    def user(text: str) -> dict:
        return {"role": "user", "content": text}

    @staticmethod
    def tool_result(call: dict, text: str) -> dict:
        return {"role": "tool", "tool_call_id": call["id"], "content": text}

    async def title(self, task: str) -> None:
        body = {"model": self.model, "max_tokens": 32,
                "messages": [{"role": "system", "content": "Write a five word title."}, self.user(task)]}
        resp = await self.client.chat.completions.create(**body)
        self.script.sent.append(Sent("title", body, resp.usage.completion_tokens))

    async def missing_model(self, task: str) -> None:
        body = {"model": "no-such-model", "max_tokens": 8, "messages": [self.user(task)]}
        try:
            await self.client.chat.completions.create(**body)
        except openai.NotFoundError:
            self.script.sent.append(Sent("failed", body))
            return
        raise AssertionError("a missing model was answered")

    async def call(self, stream, system, messages, tools, tool, streamed=True, agent=None, retried=False):
        body = {"model": self.model, "max_tokens": MAX_TOKENS,
                "messages": [{"role": "system", "content": system}] + copy.deepcopy(messages),
                "tools": [{"type": "function", "function": {"name": t, "description": TOOLS[t],
                                                            "parameters": {"type": "object"}}} for t in tools]}
        if tool:
            body["tool_choice"] = {"type": "function", "function": {"name": tool}}
        options = {"extra_headers": {"X-Agent-Id": agent} if agent else None,
                   "extra_body": {"api_key": SECRETS["body_field"]}}
        text, calls, stop, usage = "", {}, None, None
        if streamed:
            chunks = await self.client.chat.completions.create(
                **body, **options, stream=True, stream_options={"include_usage": True})
            async for chunk in chunks:
                usage = chunk.usage or usage
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    for tc in choice.delta.tool_calls or []:
                        slot = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
                        slot["id"] = tc.id or slot["id"]
                        slot["name"] = (tc.function and tc.function.name) or slot["name"]
                        slot["arguments"] += (tc.function and tc.function.arguments) or ""
                    stop = choice.finish_reason or stop
        else:
            resp = await self.client.chat.completions.create(**body, **options)
            usage, choice = resp.usage, resp.choices[0]
            text, stop = choice.message.content or "", choice.finish_reason
            for i, tc in enumerate(choice.message.tool_calls or []):
                calls[i] = {"id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments}
        cached = (usage.prompt_tokens_details.cached_tokens or 0) if usage.prompt_tokens_details else 0
        self.script.sent.append(Sent(stream, body, usage.completion_tokens, usage.prompt_tokens, cached, stop,
                                     retried))
        answer = {"role": "assistant", "content": text or None}
        if calls:
            answer["tool_calls"] = [{"id": c["id"], "type": "function",
                                     "function": {"name": c["name"], "arguments": c["arguments"]}}
                                    for c in calls.values()]
        call = answer["tool_calls"][0] if calls else None
        return answer, call


def run_session(style: str, base_url: str, model: str, session_id: str, seed: int) -> Script:
    agent = (AnthropicAgent if style == "anthropic" else OpenAIAgent)(base_url, model, session_id, seed)
    return asyncio.run(agent.run())
