"""Edit answers spliced into the file they edit (``swapos.passes.edits``), and the prompts
that ask for them (``pipeline.edit``)."""

from __future__ import annotations

import ast

from swapos.capsule.schema import Artifact, with_artifact, with_feedback, with_verdict
from swapos.capsule.schema import Feedback as CapsuleFeedback
from swapos.data.task import Task, TaskMeta
from swapos.models.templates import CHATML, ChatFormat
from swapos.passes.edits import edits_apply, merge_edit
from swapos.passes.opening import OpenAsked
from swapos.pipeline.chat_prompts import build_chat_prompt, code_opening
from swapos.pipeline.hooks import Brief
from swapos.pipeline.prompts import build_prompt, capsule_for_task

FILE = '''"""Sizes for the CLI."""

from __future__ import annotations

import math

UNITS = ("B", "KiB", "MiB")
STEP = 1024


def size(n: float) -> str:
    """``n`` in a unit."""
    return f"{n} B"


# A comment that stays.
@staticmethod
def decorated(x: int) -> int:
    return x


class Cache:
    """A cache."""

    limit = 2

    def __init__(self) -> None:
        self.d: dict[str, int] = {}

    @property
    def n(self) -> int:
        return len(self.d)

    def get(self, k: str) -> int:
        return self.d[k]


def last() -> str:
    text = """
line one
"""
    return text
'''


def defs(code: str) -> dict[str, str]:
    """Top-level definitions and class members, as source, by dotted name."""
    out: dict[str, str] = {}
    for node in ast.parse(code).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            out[node.name] = ast.unparse(node)
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if isinstance(member, ast.FunctionDef):
                        out[f"{node.name}.{member.name}"] = ast.unparse(member)
    return out


def test_a_function_the_answer_writes_replaces_the_files_where_it_stands() -> None:
    answer = 'def size(n: float) -> str:\n    return f"{n / STEP:.1f} KiB"\n'
    merged = merge_edit(FILE, answer)
    assert merged is not None
    assert defs(merged)["size"] == ast.unparse(ast.parse(answer).body[0])
    assert merged.index("def size") < merged.index("def decorated")  # where it stood
    assert {k: v for k, v in defs(merged).items() if k != "size"} == {
        k: v for k, v in defs(FILE).items() if k != "size"
    }
    assert "# A comment that stays." in merged and '"""Sizes for the CLI."""' in merged


def test_a_decorated_function_is_replaced_with_its_decorators() -> None:
    merged = merge_edit(FILE, "@staticmethod\ndef decorated(x: int) -> int:\n    return x + 1\n")
    assert merged is not None
    assert merged.count("@staticmethod") == 1 and "return x + 1" in merged
    ast.parse(merged)


def test_a_class_written_in_part_is_merged_member_by_member() -> None:
    answer = (
        "class Cache:\n"
        "    def get(self, k: str) -> int:\n"
        "        return self.d.get(k, 0)\n\n"
        "    def clear(self) -> None:\n"
        "        self.d.clear()\n"
    )
    merged = merge_edit(FILE, answer)
    assert merged is not None
    got = defs(merged)
    assert "self.d.get(k, 0)" in got["Cache.get"]
    assert "Cache.clear" in got and "Cache.__init__" in got and "Cache.n" in got
    assert '"""A cache."""' in merged and "limit = 2" in merged
    assert merged.index("def clear") < merged.index("def last")  # at the end of the class


def test_a_method_written_bare_goes_into_its_class() -> None:
    merged = merge_edit(FILE, "def get(self, k: str) -> int:\n    return self.d.get(k, -1)\n")
    assert merged is not None
    got = defs(merged)
    assert "get" not in got and "self.d.get(k, -1)" in got["Cache.get"]
    assert "    def get(self, k: str) -> int:\n        return self.d.get(k, -1)" in merged
    # not a method (no self), or a name the module defines: a module-level function
    plain = merge_edit(FILE, "def get(k: str) -> int:\n    return 0\n")
    assert plain is not None and "get" in defs(plain) and "self.d[k]" in defs(plain)["Cache.get"]


def test_a_class_written_whole_replaces_the_class() -> None:
    answer = (
        "class Cache:\n    def __init__(self) -> None:\n        self.d = {}\n\n"
        "    def n(self) -> int:\n        return 0\n\n"
        "    def get(self, k: str) -> int:\n        return 1\n"
    )
    merged = merge_edit(FILE, answer)
    assert merged is not None
    assert "limit = 2" not in merged and "@property" not in merged


def test_an_assignment_replaces_the_same_names_and_new_names_go_last() -> None:
    merged = merge_edit(FILE, "STEP = 1000\nEXTRA = 1\n")
    assert merged is not None
    assert "STEP = 1000" in merged and "STEP = 1024" not in merged
    assert merged.rstrip().endswith("EXTRA = 1")


def test_an_augmented_assignment_never_replaces_the_assignment_it_needs() -> None:
    merged = merge_edit(FILE, "STEP += 0\n")
    assert merged is not None
    assert "STEP = 1024" in merged and merged.rstrip().endswith("STEP += 0")


def test_a_new_import_follows_the_last_import_and_a_known_one_is_not_repeated() -> None:
    answer = (
        "import math\nimport re\n\ndef size(n: float) -> str:\n    return re.sub('a', 'b', '')\n"
    )
    merged = merge_edit(FILE, answer)
    assert merged is not None
    assert merged.count("import math") == 1
    assert merged.index("import math") < merged.index("import re") < merged.index("UNITS")


def test_an_import_goes_on_top_of_a_file_that_has_none() -> None:
    merged = merge_edit("def f():\n    return 1\n", "import os\n\ndef g():\n    return os.sep\n")
    assert merged == "import os\n\ndef f():\n    return 1\n\n\ndef g():\n    return os.sep\n"


def test_new_functions_are_appended_and_usage_lines_left_out() -> None:
    answer = (
        "def helper() -> int:\n    return 2\n\n"
        "print(helper())\n"
        'if __name__ == "__main__":\n    helper()\n'
    )
    merged = merge_edit(FILE, answer)
    assert merged is not None
    assert merged.rstrip().endswith("def helper() -> int:\n    return 2")
    assert "print(" not in merged and "__main__" not in merged
    assert FILE.rstrip() in merged  # nothing of the file changed


def test_a_whole_file_is_taken_as_it_is() -> None:
    whole = FILE.replace('return f"{n} B"', 'return f"{n} KiB"')
    assert merge_edit(FILE, whole) == whole


def test_what_does_not_parse_is_not_merged() -> None:
    assert merge_edit(FILE, "def size(:\n") is None
    assert merge_edit("def f(:\n", "def f():\n    return 1\n") is None


def test_a_multiline_string_inside_a_member_keeps_its_lines() -> None:
    answer = 'class Cache:\n  def get(self, k):\n    return """\nraw\n"""\n'
    merged = merge_edit(FILE, answer)
    assert merged is not None
    # the member moved to the class's indentation (its body keeps its own depth), the string not
    assert '    def get(self, k):\n      return """\nraw\n"""' in merged
    ast.parse(merged)


def test_edits_are_asked_of_bugfixes_and_features_with_a_starter_only() -> None:
    def task(category: str, starter: str = "def f():\n    pass\n") -> Task:
        meta = TaskMeta(task_id="t", category=category, difficulty=1)  # type: ignore[arg-type]
        return Task(meta=meta, root="", problem="p", starter=starter, tests={})

    assert edits_apply(task("bugfix")) and edits_apply(task("feature"))
    assert not edits_apply(task("refactor")) and not edits_apply(task("completion"))
    assert not edits_apply(task("feature", starter="\n"))


FMT = ChatFormat(template=CHATML, messages=True)
TASK = Task(
    meta=TaskMeta(task_id="bugfix/size", category="bugfix", difficulty=2),
    root="",
    problem="`size(2048)` should return `'2.0 KiB'`.",
    starter=FILE,
    tests={"test_size.py": "SECRET"},
)
EDIT_ASK = "Do not rewrite the whole file. Reply with just the functions or classes"


def words(text: str) -> int:
    return len(text.split())


def failed(capsule_code: str, attempt: int = 1):  # type: ignore[no-untyped-def]
    capsule = with_artifact(
        capsule_for_task(TASK), Artifact(attempt=attempt, phase="code", code=capsule_code)
    )
    capsule = with_verdict(capsule, attempt=attempt, passed=False)
    fb = CapsuleFeedback(attempt=attempt, source="grader", text="1/1 tests failed: test_size")
    return with_feedback(capsule, fb)


def task_of(category: str, problem: str) -> Task:
    """A task of ``category`` on :data:`FILE` with ``problem`` as its brief."""
    meta = TaskMeta(task_id="t", category=category, difficulty=2)  # type: ignore[arg-type]
    return Task(meta=meta, root="", problem=problem, starter=FILE, tests={})


def test_no_edit_is_asked_of_a_refactor_nor_of_a_base_model() -> None:
    asks = "Add a function `fmt_size(n)` that formats a size."
    feature = task_of("feature", asks)
    local = ChatFormat(template=CHATML)  # a local model: its answer can be opened
    opened = build_chat_prompt(
        "code", feature, capsule_for_task(feature), words, 5000, local, opening=opening_of(feature)
    )
    assert opened.edit_base == FILE and EDIT_ASK in opened.text
    refactor = task_of("refactor", asks)
    prompt = build_chat_prompt(
        "code",
        refactor,
        capsule_for_task(refactor),
        words,
        5000,
        local,
        opening=opening_of(refactor),
    )
    assert prompt.edit_base is None and EDIT_ASK not in prompt.text
    base_model = build_prompt("code", TASK, capsule_for_task(TASK), words, 5000)
    assert base_model.edit_base is None


def opening_of(task: Task) -> str:
    """The opening the ``open_asked`` pass reads of ``task``'s brief."""
    return OpenAsked().read(task, Brief()).opening


def test_the_opening_is_the_first_definition_the_brief_asks_to_add() -> None:
    def feature(problem: str, category: str = "feature") -> Task:
        return task_of(category, problem)

    ring = feature("Add a `RingBuffer` class with `append` and `items`.")
    assert opening_of(ring) == "class RingBuffer"
    assert code_opening(ring, opening_of(ring)) == "class RingBuffer"
    assert code_opening(ring) == ""  # the core alone opens no definition
    table = feature("Add a helper `format_table(rows, headers)` next to `size`.")
    assert opening_of(table) == "def format_table"
    # a constant alone is no definition to open; a name the starter has is not one to add
    assert opening_of(feature("Add a constant `LIMIT = 3`.")) == ""
    assert opening_of(feature("Add a function `size(n)`.")) == ""
    assert opening_of(feature("Add a function `f(x)`.", "refactor")) == ""


def test_an_opened_first_request_asks_for_an_edit_in_a_turn_it_opens() -> None:
    text_fmt = ChatFormat(template=CHATML)  # a local model: its answer can be opened
    task = task_of("feature", "Add a helper `format_table(rows, headers)`.")
    opened = build_chat_prompt(
        "code", task, capsule_for_task(task), words, 5000, text_fmt, opening=opening_of(task)
    )
    assert opened.text.endswith("```python\ndef format_table") and EDIT_ASK in opened.text
    assert opened.answer_prefix == "```python\ndef format_table"
    assert (opened.opening, opened.edit_base) == ("def format_table", FILE)
    plain = build_chat_prompt("code", task, capsule_for_task(task), words, 5000, text_fmt)
    assert plain.text.endswith("```python\n") and plain.edit_base is None
    # a model behind a chat API that cannot continue a turn gets no opening and no edit
    api = build_chat_prompt(
        "code", task, capsule_for_task(task), words, 5000, FMT, opening=opening_of(task)
    )
    assert api.opening == "" and api.edit_base is None and EDIT_ASK not in api.text
