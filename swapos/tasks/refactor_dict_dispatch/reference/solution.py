import operator

OPERATIONS = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
}


def apply_op(op: str, a: float, b: float) -> float:
    """Apply the arithmetic operation named op to a and b."""
    if op not in OPERATIONS:
        raise ValueError(f"unknown operation: {op}")
    return OPERATIONS[op](a, b)
