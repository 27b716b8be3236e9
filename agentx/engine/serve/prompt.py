"""A request's body as the engine takes it: the parsed request, its prompt's token ids, its
token budget and the tool it forces, or a BadRequest naming what is wrong."""

from __future__ import annotations

from agentx.engine import api
from agentx.engine.api import BadRequest, ChatRequest, MessagesRequest, forced_tool
from agentx.engine.tokenizer import Tokenizer, render_chat


def parse_prompt(body: bytes, style: str, tokenizer: Tokenizer, core, model_name: str):
    """(request, prompt, max_tokens, tool, text) of a body in `style`: completion, chat (OpenAI) or
    messages (Anthropic); checked against the served model's name and `core`'s context. `text`:
    the prompt as text (None for token ids)."""
    tool = text = None
    if style == "chat":
        req = api.parse(ChatRequest, body)
        messages = [{"role": m.role, "content": m.content, "tool_calls": m.tool_calls} for m in req.messages]
        text = render_chat(messages, req.tools)
        prompt = tokenizer.encode(text)
        max_tokens = req.max_completion_tokens or req.max_tokens
        tool = forced_tool(req.tools, req.tool_choice)
    elif style == "messages":
        req = api.parse(MessagesRequest, body)
        messages = [{"role": m.role, "content": m.content} for m in req.messages]
        text = render_chat(messages, req.tools, req.system)
        prompt = tokenizer.encode(text)
        max_tokens = req.max_tokens
        tool = forced_tool(req.tools, req.tool_choice)
    else:
        req = api.parse_completion(body, core.vocab)  # token ids checked against the vocabulary
        text = req.prompt if isinstance(req.prompt, str) else None
        prompt = tokenizer.encode(text) if text is not None else req.prompt
        max_tokens = req.max_tokens
    if req.model is not None and req.model != model_name:
        raise BadRequest(f"The model `{req.model}` does not exist.", 404, "NotFoundError", "model")
    if not prompt:
        raise BadRequest("The prompt is empty.", param="prompt")
    problem = core.context_error(len(prompt), max_tokens or 1)
    if problem:
        raise BadRequest(problem, param="prompt" if style == "completion" else "messages")
    return req, prompt, max_tokens, tool, text
