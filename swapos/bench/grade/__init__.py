"""``bench grade``: the grader's cost per grade over a suite's references."""
