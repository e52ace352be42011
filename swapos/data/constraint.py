"""What a generation's text must be: a grammar the sampler enforces (plain data).

A request that asks for JSON, for an answer that validates against a JSON schema, or for a
tool call gets a :class:`Constraint` in its sampling parameters. The llama backend compiles
``gbnf`` with llama.cpp's grammar sampler; the fake backend answers ``example`` where its
scripted reply is not JSON (``backends/fake.py``).
"""

from __future__ import annotations

import msgspec


class Constraint(msgspec.Struct, frozen=True, kw_only=True):
    """A grammar over a generation's text.

    Attributes:
        gbnf: the grammar in llama.cpp's GBNF, its start rule named ``root``.
        triggers: empty, the grammar holds from the first token; otherwise a *lazy*
            grammar: the text is free until the model samples one of these tokens (each
            text is one token of the model's vocabulary: a tool call's opening tag), and
            from that token on (it included) it must follow the grammar. A trigger that is
            not one token in a model's vocabulary is dropped; with none left the text is
            free (the answer is still parsed for calls).
        example: a short text the grammar accepts (the fake backend's answer where its
            script does not fit; a check that the grammar is satisfiable).
        what: what it constrains to, for logs and errors (``"json_schema 'weather'"``,
            ``"a call of get_weather"``).
    """

    gbnf: str
    triggers: tuple[str, ...] = ()
    example: str = ""
    what: str = ""

    @property
    def lazy(self) -> bool:
        """The grammar waits for one of :attr:`triggers`."""
        return bool(self.triggers)
