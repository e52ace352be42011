"""Prompts for instruct models: each phase as a conversation in the model's chat template.

A base model continues a document (:mod:`swapos.pipeline.prompts`); an instruct model is asked.
Each phase has its role (the system message) and its request:

* **reason**: a short numbered plan, no code;
* **code**: the whole file in one fenced block. The assistant's turn is opened with
  ```` ```python ```` so the answer is the code and generation stops at the closing fence;
  for the first attempt at a ``completion`` task the turn is opened with the function's
  signature and docstring too, so the model writes only the body; when a pass read from a
  bugfix's or feature's brief a function or class to add (:attr:`Brief.opening
  <swapos.pipeline.hooks.Brief.opening>`), the first request asks for an edit and the turn
  is opened with that definition's first words (:func:`code_opening`).

A **recap** is the code request asked afresh: one user turn with the brief, every failed
answer (each distinct code once, with its outcome) and a request for a different answer. A
model whose conversation shows its own failed answer tends to write it again; shown the same
answer as one that was tried and failed, it changes it. When a recap is asked for is the
retry policy's (:mod:`swapos.policies.retry`, its *Repeats* rule). A fixer that starts from
an earlier, better candidate than the newest (*Best candidate*) reads, after the newest
outcome, that it passes fewer tests and the better candidate's code to fix.

An opened first request asks for only the functions and classes that change or are added,
each whole, and the prompt names the code the answer is spliced into
(:attr:`Prompt.edit_base`: the starter); the pass that opened it splices the answer back
(a :class:`~swapos.pipeline.hooks.CandidateRepair`), so every later step sees a whole file.

Conversations are *append-only* across attempts, as the completion prompts are: the coder's
conversation of attempt N is its conversation of attempt N-1, its own answer (as it wrote it),
then a user turn with the test output and the request to fix. So the rendered prompt of a
retry begins with exactly what the model read and wrote before, and the KV prefix cache
re-reads only the new turn. The stable part (the brief, starter and plan, in the first user
turn) is the same for every attempt of a task.

A remote model behind a chat API (``ChatFormat.messages``) gets the same conversation as
messages and no stable prefix (there is no local KV cache to reuse it). An API that continues
a final assistant message (``ChatFormat.continues``: ``swapos serve``, vLLM) gets the cue as
that message, so it reads and writes what a local model would; any other API gets nothing of
its answer written for it: no cue, no opened code fence or function, no stop at the closing
fence (it opens its own fence; the extractor finds the block).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Final

import msgspec

from swapos.capsule.compress import AttemptView, CapsuleView, CountTokens
from swapos.capsule.schema import Artifact, Capsule, Feedback
from swapos.data.task import Task
from swapos.models.templates import ChatFormat, ChatMessage, render_chat
from swapos.pipeline.fix_context import Base, base_of
from swapos.pipeline.identity import candidate_identity
from swapos.pipeline.prompts import PLAN_CUE, Assembler, Phase, Prompt, compose

CODE_CUE: Final = "```python\n"
CODE_STOP: Final[tuple[str, ...]] = ("\n```",)

PLANNER: Final = (
    "You are a senior Python engineer. You plan a change before anyone writes code: "
    "short, concrete steps."
)
CODER: Final = (
    "You are an expert Python programmer. You write correct, complete, idiomatic Python "
    "that passes its tests."
)

_SYSTEM: Final = {"reason": PLANNER, "code": CODER}
_FEEDBACK_TITLE: Final = {
    "grader": "Test output",
    "selfcheck": "Checked before running the tests",
    "critic": "Review",  # in capsules of runs with reviews (read, never written now)
}


def build_chat_prompt(  # noqa: PLR0917  (build_prompt's arguments, and the format)
    phase: Phase,
    task: Task,
    capsule: Capsule,
    count_tokens: CountTokens,
    budget_tokens: int,
    fmt: ChatFormat,
    *,
    recap: bool = False,
    base: int = 0,
    opening: str = "",
) -> Prompt:
    """Build the chat prompt of ``phase`` within ``budget_tokens`` (see ``build_prompt``);
    with ``recap``, the code request as a recap, with ``base`` starting from that attempt's
    candidate, and with ``opening`` (a repository task's: the first words of a definition
    its brief asks to add) a first request for an edit opened with it (:func:`code_opening`).

    Raises:
        ValueError: ``phase`` is not one of the two.
        CapsuleBudgetError: goal, starter and newest attempt alone exceed the budget.
        TemplateError: the model's chat template fails on the conversation.
    """
    start = base_of(capsule, base)
    code: ChatAssembler
    if recap:
        code = _with_base(_recap, start)
    else:
        code = _with_base(functools.partial(_code, opening=opening), start)
    layouts = {**_ASSEMBLERS, "code": code}
    assemblers = {p: _in_format(assemble, fmt) for p, assemble in layouts.items()}
    return compose(phase, task, capsule, count_tokens, budget_tokens, assemblers)


def _with_base(
    assemble: Callable[[Task, CapsuleView, ChatFormat, Base | None], Prompt],
    base: Base | None,
) -> ChatAssembler:
    def laid_out(task: Task, view: CapsuleView, fmt: ChatFormat) -> Prompt:
        return assemble(task, view, fmt, base)

    return laid_out


def _based(base: Base | None) -> str:
    """What a fixer starting from ``base`` reads before the request (*Best candidate*)."""
    return f"{base.note()}\n{_fenced(base.code)}\n\n" if base is not None else ""


def _in_format(assemble: ChatAssembler, fmt: ChatFormat) -> Assembler:
    def laid_out(task: Task, view: CapsuleView) -> Prompt:
        return assemble(task, view, fmt)

    return laid_out


def stable_text(task: Task, view: CapsuleView, *, with_plan: bool = True) -> str:
    """The brief, rules, starter code and plan: the part every attempt shares."""
    parts: list[str] = []
    if task.category == "completion":
        name = task.entry_point or "the function"
        parts.append(
            f"Complete the Python function `{name}` so that it does what its docstring says."
        )
        parts.append(f"```python\n{task.starter.strip(chr(10))}\n```")
    else:
        parts.append(view.goal.strip())
        if view.constraints:
            parts.append("Rules:\n" + "\n".join(f"- {c.strip()}" for c in view.constraints))
        if task.starter.strip():
            parts.append(f"solution.py now:\n```python\n{task.starter.strip(chr(10))}\n```")
    if with_plan and view.plan_steps:
        steps = "\n".join(f"{i}. {s.strip()}" for i, s in enumerate(view.plan_steps, 1))
        parts.append("Plan:\n" + steps)
    if view.earlier or view.omitted_attempts:
        lines = [f"- {line}" for line in view.earlier]
        if view.omitted_attempts:
            lines.insert(0, f"- ({len(view.omitted_attempts)} earlier attempts not shown)")
        parts.append("Earlier attempts:\n" + "\n".join(lines))
    return "\n\n".join(parts)


def _request(task: Task, *, retry: bool, edit: bool = False) -> str:
    fixed = "corrected " if retry else ""
    if edit:
        return (
            f"Do not rewrite the whole file. Reply with just the {fixed}functions or classes "
            "of solution.py that you change or add, each one complete, in one ```python code "
            "block, with any imports they need."
        )
    if task.category == "completion":
        what = f"the {fixed}complete function, with the imports it needs,"
        terse = " Leave out its docstring." if retry else ""
    else:
        what, terse = f"the {fixed}complete solution.py", ""
    return f"Reply with {what} in one ```python code block.{terse}"


def _outcome(status: str, feedback: tuple[Feedback, ...]) -> str:
    parts = [f"Result: {status}." if status else ""]
    for f in feedback:
        parts.append(f"{_FEEDBACK_TITLE[f.source]}:\n{f.text.strip()}")
    return "\n\n".join(p for p in parts if p)


def _answer(artifact: Artifact) -> str:
    """The coder's turn as it wrote it: the fenced code."""
    return _fenced(artifact.answer or artifact.code)


def _fenced(code: str) -> str:
    """``code`` in the coder's fence, as a chat answer writes it (the cue opens it)."""
    body = code.strip("\n")
    return f"{CODE_CUE}{body}\n```"


def _own_answer(artifact: Artifact) -> str:
    """The coder's turn as a model that takes messages wrote it: its whole reply (prose and
    fences included), or the fenced code when its reply was the code."""
    return artifact.answer.strip("\n") if artifact.answer else _answer(artifact)


def _attempts(view: CapsuleView) -> list[AttemptView]:
    """Whole earlier attempts and the newest one, oldest first."""
    attempts = list(view.whole)
    if view.newest is not None:
        attempts.append(
            AttemptView(artifact=view.newest, status=view.newest_status, feedback=view.feedback)
        )
    return attempts


def _render(
    fmt: ChatFormat, phase: Phase, messages: list[ChatMessage], stable: str, cue: str
) -> tuple[str, str]:
    """The rendered conversation split into (stable prefix, the rest + cue); for a model
    that takes messages, ("", the messages), the cue a final assistant message if the API
    continues one, else left out."""
    system = ChatMessage(role="system", content=_SYSTEM[phase])
    if fmt.messages:
        opened = [ChatMessage(role="assistant", content=cue)] if cue and fmt.continues else []
        return "", render_chat(fmt, [system, *messages, *opened])
    text = render_chat(fmt, [system, *messages]) + cue
    at = text.find(stable) if stable else -1
    cut = at + len(stable) if at >= 0 else 0
    return text[:cut], text[cut:]


def _reason(task: Task, view: CapsuleView, fmt: ChatFormat) -> Prompt:
    stable = stable_text(task, view, with_plan=False)
    ask = (
        "Write a short numbered plan for this change: at most 5 steps, one line each. "
        "Do not write code."
    )
    head, rest = _render(fmt, "reason", [_user(f"{stable}\n\n{ask}")], stable, PLAN_CUE)
    prefix = PLAN_CUE if fmt.opens_answer else ""
    return Prompt(
        stable=head, variable=rest, stop=(), answer_prefix=prefix, dropped=view.dropped, chat=True
    )


def _code(
    task: Task,
    view: CapsuleView,
    fmt: ChatFormat,
    base: Base | None = None,
    *,
    opening: str = "",
) -> Prompt:
    stable = stable_text(task, view)
    attempts = _attempts(view)
    opening = "" if attempts or not fmt.opens_answer else code_opening(task, opening)
    edit = bool(opening) and task.category != "completion"  # a definition to add, opened
    messages = [_user(f"{stable}\n\n{_request(task, retry=False, edit=edit)}")]
    for i, attempt in enumerate(attempts):
        turn = _answer(attempt.artifact) if fmt.opens_answer else _own_answer(attempt.artifact)
        messages.append(ChatMessage(role="assistant", content=turn))
        outcome = _outcome(attempt.status, attempt.feedback)
        based = _based(base) if i == len(attempts) - 1 else ""
        messages.append(_user(f"{outcome}\n\n{based}{_request(task, retry=True)}"))
    # an edit's answer is the fenced definition, as the extractor reads it; a completion's
    # is the function's body, continued from its opening
    plain = CODE_CUE if fmt.opens_answer and not opening else ""
    prefix = CODE_CUE + opening if edit else plain
    head, rest = _render(fmt, "code", messages, stable, CODE_CUE + opening)
    return Prompt(
        stable=head, variable=rest, stop=CODE_STOP if fmt.opens_answer else (),
        answer_prefix=prefix, dropped=view.dropped, chat=True, opening=opening,
        edit_base=task.starter if edit else None,
    )  # fmt: skip


def _recap(
    task: Task,
    view: CapsuleView,
    fmt: ChatFormat,
    base: Base | None = None,
) -> Prompt:
    stable = stable_text(task, view)
    tried: list[str] = []
    shown: dict[str, int] = {}  # a candidate's identity -> the attempt that shows its code
    for attempt in _attempts(view):
        n = attempt.artifact.attempt
        key = candidate_identity(attempt.artifact.code)
        first = shown.setdefault(key, n)
        code = f"{_fenced(attempt.artifact.code)}\n\n" if first == n else ""
        same = "" if first == n else f" the same code as attempt {first}."
        outcome = _outcome(attempt.status, attempt.feedback)
        tried.append(f"Attempt {n}:{same}\n{code}{outcome}".strip())
    ask = "None of these passed. " + _based(base)
    ask += "Write a different answer that passes the tests. "
    ask += _request(task, retry=True)  # one request: the last
    content = "\n\n".join([stable, "These answers were tried:", *tried, ask])
    head, rest = _render(fmt, "code", [_user(content)], stable, CODE_CUE)
    return Prompt(
        stable=head, variable=rest, stop=CODE_STOP if fmt.opens_answer else (),
        answer_prefix=CODE_CUE if fmt.opens_answer else "", dropped=view.dropped, chat=True,
    )  # fmt: skip


def code_opening(task: Task, opening: str = "") -> str:
    """What a first attempt's prompt writes of the coder's answer after the opening fence: for
    a ``completion`` task the function's signature and docstring, so the model writes only the
    body (a third of the tokens), as a completion model would; for another task ``opening``,
    what a pass read of its brief (``def format_table``: a definition to add, so the answer
    is that definition and not the starter again; the request asks for an edit); else
    nothing. Retries get no opening: a model continuing its own function tends to write the
    same body again."""
    return task.starter if task.category == "completion" else opening


def _user(content: str) -> ChatMessage:
    return ChatMessage(role="user", content=content)


ChatAssembler = Callable[[Task, CapsuleView, ChatFormat], Prompt]

_ASSEMBLERS: Final[dict[str, ChatAssembler]] = {
    "reason": _reason,
    "code": _code,
}


def replace_answer(artifact: Artifact, answer: str) -> Artifact:
    """``artifact`` remembering the model's own text when it differs from the code."""
    return (
        artifact
        if answer.strip() == artifact.code.strip()
        else msgspec.structs.replace(artifact, answer=answer)
    )
