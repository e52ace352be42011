"""Which use comes after a candidate's grade: the fixer's model, or the next task's.

After a code phase the pipeline's next model depends on the grade: a failure goes to the
fixer, a pass to the next task. Scheduling the fixer's model while the grade runs costs a
passing task two swaps when the budget holds one model (the fixer's model comes in, then
the coder's goes back in for the next task), and spares a failing one a load. Which of the
two is cheaper depends on how often candidates pass, which :class:`PassRate` estimates from
the run's own grades. Pure and synchronous.
"""

from __future__ import annotations


class PassRate:
    """How often graded candidates pass: ``(passes + 1) / (grades + 2)`` (Laplace's rule,
    so no grades yet is an even chance)."""

    def __init__(self) -> None:
        self.grades = 0
        self.passes = 0

    def observe(self, passed: bool) -> None:
        """One graded candidate (the task's tests, not a self-check)."""
        self.grades += 1
        self.passes += passed

    @property
    def estimate(self) -> float:
        return (self.passes + 1) / (self.grades + 2)

    def expects_pass(self) -> bool:
        """Whether the next graded candidate is more likely to pass than to fail."""
        return self.estimate > 0.5
