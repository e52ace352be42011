def apply_op(op: str, a: float, b: float) -> float:
    """Apply the arithmetic operation named op to a and b."""
    if op == "add":
        return a + b
    elif op == "sub":
        return a - b
    elif op == "mul":
        return a * b
    elif op == "div":
        return a / b
    else:
        raise ValueError(f"unknown operation: {op}")
