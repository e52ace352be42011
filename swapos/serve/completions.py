"""``/v1/chat/completions`` and ``/v1/completions``: from a decoded body to a checked,
rendered request (:func:`prepare_chat`, :func:`prepare_text`).

:mod:`swapos.serve.running` runs it; :mod:`swapos.serve.responses` turns what ran into
the response.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Literal

import anyio
import anyio.to_thread
import msgspec

from swapos.data.constraint import Constraint
from swapos.data.generation import DraftRequest
from swapos.data.sampling import SamplingParams
from swapos.models.templates import CHATML, ChatFormat, ChatMessage, TemplateError, render_chat
from swapos.policies.contexts import Refuse, context_step, needed_context, refusal_text
from swapos.serve.errors import RequestError
from swapos.serve.sampling import Sampling, sampling_of
from swapos.serve.schemas import (
    ChatCompletionRequest,
    ChatMessageIn,
    CompletionRequest,
    Prediction,
)
from swapos.serve.state import Server
from swapos.serve.tools import ToolPlan, grammar_of, template_calls

Kind = Literal["chat", "text"]
INLINE_COUNT_CHARS = 16_384
"""Prompts up to this long are counted on the event loop (well under a millisecond)."""
ROLES: dict[str, Literal["system", "user", "assistant", "tool"]] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}


@dataclass(frozen=True)
class Prepared:
    """A checked request, ready to run.

    Attributes:
        tools: how the request's tools were offered (its answer's calls are parsed by it);
            None when none were.
        echo: text that comes back before the completion (``echo``: the prompt).
        n_ctx: the context it needs (its model is reloaded with more if it has less).
    """

    kind: Kind
    model: str
    prompt: str
    stable_prefix: str
    special: bool
    params: SamplingParams
    prompt_tokens: int
    key: str | None
    stream: bool
    tools: ToolPlan | None = None
    echo: str = ""
    n_ctx: int = 0


# --- preparing ----------------------------------------------------------------------------


def served_model(server: Server, requested: str) -> str:
    """The model ``requested`` names (its name or an alias).

    Raises:
        RequestError: it names none of the server's models (404, listing them).
    """
    model = server.names.resolve(requested)
    if model is None:
        raise RequestError(
            404,
            f"The model {requested!r} does not exist; this server's models are: "
            f"{server.names.known()}",
            param="model",
            code="model_not_found",
        )
    return model


def _messages(messages: list[ChatMessageIn]) -> list[ChatMessage]:
    if not messages:
        raise RequestError(400, "messages must hold at least one message", param="messages")
    out = []
    for i, m in enumerate(messages):
        role = ROLES.get(m.role)
        if role is None:
            raise RequestError(
                400,
                f"messages[{i}].role {m.role!r} is not supported (use one of: {', '.join(ROLES)})",
                param=f"messages[{i}].role",
            )
        content = m.content
        if isinstance(content, list):
            if any(p.type != "text" for p in content):
                raise RequestError(
                    400,
                    f"messages[{i}].content: only text parts are supported",
                    param=f"messages[{i}].content",
                )
            content = "".join(p.text for p in content)
        out.append(
            ChatMessage(
                role=role,
                content=content or "",
                tool_calls=template_calls(m.tool_calls),
                tool_call_id=m.tool_call_id or "",
                name=(m.name or "") if role == "tool" else "",
            )
        )
    return out


def _prediction(prediction: Prediction | None) -> str:
    """The text of a predicted output (``{"type": "content", "content": ...}``)."""
    if prediction is None:
        return ""
    if prediction.type != "content":
        raise RequestError(
            400, f"prediction.type must be 'content', got {prediction.type!r}", "prediction"
        )
    content = prediction.content
    return content if isinstance(content, str) else "".join(p.text for p in content)


@dataclass(frozen=True)
class ContextAsk:
    """What an Ollama request says of its context.

    Attributes:
        num_ctx: ``options.num_ctx``, the context the client wants (grown up to the cap).
        fill: ``num_predict`` -1 or -2: the answer may take the room the context has, without
            growing it for the answer's sake.
    """

    num_ctx: int | None = None
    fill: bool = False


async def _params_for(
    server: Server,
    model: str,
    prompt: str,
    sampling: Sampling,
    *,
    param: str,
    prediction: str = "",
    constraint: Constraint | None = None,
    context: ContextAsk | None = None,
) -> tuple[SamplingParams, int, int]:
    """Sampling parameters, the prompt's token count and the context the request needs (the
    prompt and the answer it asks for, or ``num_ctx``: ``policies/contexts.py``). A prompt
    that the model's largest context cannot hold is refused naming both numbers.

    The prompt is counted with the model's own tokenizer, which needs no loaded model (a
    vocabulary-only read of its file; characters on the fake backend)."""
    counter = await server.system.token_counter(model)
    if len(prompt) > INLINE_COUNT_CHARS:  # tokenizing a long text takes a while
        count = await anyio.to_thread.run_sync(counter, prompt)
    else:
        count = counter(prompt)
    context = context or ContextAsk()
    spec = server.system.specs[model]
    wanted = sampling.max_tokens or server.settings.default_max_tokens
    need = needed_context(count, 0 if context.fill else wanted, context.num_ctx)
    step = context_step(need, prompt_tokens=count, loaded=None, start=spec.n_ctx, cap=spec.ctx_cap)
    if isinstance(step, Refuse):
        raise RequestError(
            400,
            refusal_text(step, model=model, field=param),
            param=param,
            code="context_length_exceeded",
        )
    n_ctx = step.n_ctx if context.fill else min(need, spec.ctx_cap)
    room = n_ctx - count
    params = sampling.params(
        max_tokens=room if context.fill else min(wanted, room),
        draft=DraftRequest(kind="prediction" if prediction else "serve", prediction=prediction),
        constraint=constraint,
    )
    return params, count, n_ctx


async def prepare_chat(
    server: Server,
    body: ChatCompletionRequest,
    key: str | None,
    *,
    context: ContextAsk | None = None,
) -> Prepared:
    """Check a chat request and render its conversation with the model's chat template
    (ChatML as plain text for a model prompted as a base model), its tools included.

    The stable prefix is the conversation before the last message: the KV cache keeps the
    state after each answer, so the next turn of the same chat re-reads only what is new.
    With ``continue_final_message`` the last message is an assistant turn the model goes
    on writing: the prompt is the conversation before it, the assistant's opening, then its
    text (as the pipeline renders a cue for a local model).

    Raises:
        RequestError: the request cannot be served (its status and message say why).
    """
    if body.n != 1:
        raise RequestError(400, "n must be 1: SwapOS generates one choice", param="n")
    body = msgspec.structs.replace(body, model=served_model(server, body.model))
    messages = _messages(body.messages)
    chat = await server.system.chat_format(body.model)
    sampling = sampling_of(body)
    structured = body.response_format is not None and body.response_format.type != "text"
    if body.tools or body.tool_choice is not None or structured:
        # compiling a schema takes up to ~0.1 s within its bounds: off the event loop
        plan, constraint = await anyio.to_thread.run_sync(partial(grammar_of, body, chat))
    else:
        plan, constraint = None, None
    fmt = chat or ChatFormat(template=CHATML)
    tools = plan.template_tools if plan is not None else ()
    try:
        prompt, stable = _render_conversation(fmt, messages, _continues(body, messages), tools)
    except TemplateError as exc:
        raise RequestError(400, str(exc), param="messages") from exc
    params, count, n_ctx = await _params_for(
        server, body.model, prompt, sampling, param="messages",
        prediction=_prediction(body.prediction), constraint=constraint, context=context,
    )  # fmt: skip
    return Prepared(
        kind="chat",
        model=body.model,
        prompt=prompt,
        stable_prefix=stable,
        special=chat is not None,
        params=params,
        prompt_tokens=count,
        key=body.user or key,
        stream=body.stream,
        tools=plan,
        n_ctx=n_ctx,
    )


def _continues(body: ChatCompletionRequest, messages: list[ChatMessage]) -> bool:
    """Whether the request asks to continue its final message (checked: an assistant turn,
    without a generation prompt)."""
    if not body.continue_final_message:
        if not body.add_generation_prompt:
            raise RequestError(
                400,
                "add_generation_prompt=false is only supported with continue_final_message=true",
                param="add_generation_prompt",
            )
        return False
    if body.add_generation_prompt:
        raise RequestError(
            400,
            "continue_final_message=true needs add_generation_prompt=false",
            param="add_generation_prompt",
        )
    if messages[-1].role != "assistant":
        raise RequestError(
            400,
            "continue_final_message=true needs the last message to be the assistant's",
            param="messages",
        )
    return True


def _render_conversation(
    fmt: ChatFormat,
    messages: list[ChatMessage],
    continues: bool,
    tools: tuple[dict[str, Any], ...],
) -> tuple[str, str]:
    """(prompt, stable prefix) of a conversation; with ``continues`` its final assistant
    message is the opening of the answer.

    Raises:
        TemplateError: the template refused the conversation.
    """
    if continues:
        *turns, opened = messages
        prompt = render_chat(fmt, turns, tools=tools) + opened.content
    else:
        turns, prompt = messages, render_chat(fmt, messages, tools=tools)
    before = turns[:-1]
    stable = render_chat(fmt, before, add_generation_prompt=False, tools=tools) if before else ""
    return prompt, stable


async def prepare_text(
    server: Server,
    body: CompletionRequest,
    key: str | None,
    *,
    constraint: Constraint | None = None,
    context: ContextAsk | None = None,
) -> Prepared:
    """Check a completion request: one prompt the model continues as is, or, with
    ``suffix``, the gap between the prompt and the suffix it fills in (for a model whose
    vocabulary has fill-in-the-middle tokens); ``constraint``: a grammar the continuation
    follows (Ollama's ``format`` on a raw prompt); ``context``: what an Ollama request says
    of its context.

    Raises:
        RequestError: the request cannot be served (its status and message say why).
    """
    if body.n != 1:
        raise RequestError(400, "n must be 1: SwapOS generates one choice", param="n")
    body = msgspec.structs.replace(body, model=served_model(server, body.model))
    prompt = body.prompt
    if isinstance(prompt, list):
        if len(prompt) != 1:
            raise RequestError(400, "prompt must be one string", param="prompt")
        prompt = prompt[0]
    text = prompt
    sampling = sampling_of(body)
    if body.suffix is not None:
        fim = await server.system.fim_tokens(body.model)
        if fim is None:
            raise RequestError(
                400,
                f"{body.model!r} cannot fill in the middle: its vocabulary has no "
                "fill-in-the-middle tokens (send the prompt without suffix)",
                param="suffix",
            )
        text = fim.prompt(prompt, body.suffix)
        sampling = replace(sampling, stop=(*sampling.stop, *fim_stop(body.suffix)))
    params, count, n_ctx = await _params_for(
        server, body.model, text, sampling, param="prompt", constraint=constraint,
        context=context,
    )  # fmt: skip
    return Prepared(
        kind="text",
        model=body.model,
        prompt=text,
        stable_prefix="",
        special=body.suffix is not None,
        params=params,
        prompt_tokens=count,
        key=body.user or key,
        stream=body.stream,
        echo=prompt if body.echo else "",
        n_ctx=n_ctx,
    )


def fim_stop(suffix: str) -> tuple[str, ...]:
    """Where a filled-in middle ends: at the suffix's first line that is not blank (with
    its indentation). A model that writes past the gap writes the suffix next; the middle
    is what comes before it. Empty for a blank suffix."""
    line = next((ln for ln in suffix.splitlines() if ln.strip()), "")
    return (line,) if line else ()
