"""ListOps (Nangia & Bowman 2018), generated as in the Long Range Arena (Tay et al. 2021): nested list operations.

An expression such as ``[MAX 2 9 [MIN 4 7 ] 0 ]`` applies ``MAX`` (maximum), ``MIN`` (minimum), ``MED``
(median, rounded down) or ``SM`` (sum modulo 10) to digits and sub-expressions; its value, a digit, is
the label. Tokens are the four ``[OP`` openers, ``]`` and the digits ``0``-``9``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import torch

from .splits import Splits, TensorSplit
from .vocab import Vocabulary, pad_sequences

__all__ = ["listops", "evaluate_listops", "OPERATORS", "LISTOPS_VOCAB"]

OPERATORS = ("MAX", "MIN", "MED", "SM")
"""ListOps operators, as in the Long Range Arena (which leaves out the original FIRST and LAST)."""

LISTOPS_VOCAB = Vocabulary([*(f"[{op}" for op in OPERATORS), "]", *(str(d) for d in range(10))])
"""The 17 tokens: ``<pad>``, ``<unk>``, ``[MAX``, ``[MIN``, ``[MED``, ``[SM``, ``]``, ``0``-``9``."""

_VALUE_P = 0.25  # LRA: below the maximum depth, a node is an operator with probability 0.25
_MAX_REJECTIONS = 100_000


def _median(args: Sequence[int]) -> int:
    s = sorted(args)
    return (s[(len(s) - 1) // 2] + s[len(s) // 2]) // 2  # int(np.median(args)) in the reference generators


_APPLY: dict[str, Callable[[Sequence[int]], int]] = {
    "MAX": max,
    "MIN": min,
    "MED": _median,
    "SM": lambda args: sum(args) % 10,
}


def evaluate_listops(expression: str | Sequence[str]) -> int:
    """The value of a ListOps expression, given as a string or as its tokens.

    Raises:
        ValueError: Unknown token, unbalanced brackets, an operator without arguments, or not exactly
            one top-level value.
    """
    tokens = expression.split() if isinstance(expression, str) else list(expression)
    frames: list[list] = [["top"]]  # open operators: [op, arg, arg, ...]; the bottom frame collects the result
    for token in tokens:
        if token.startswith("[") and token[1:] in _APPLY:
            frames.append([token[1:]])
        elif token == "]":
            if len(frames) == 1:
                raise ValueError(f"unbalanced ']' in ListOps expression {' '.join(tokens)!r}")
            op, *args = frames.pop()
            if not args:
                raise ValueError(f"[{op} without arguments in ListOps expression {' '.join(tokens)!r}")
            frames[-1].append(_APPLY[op](args))
        elif len(token) == 1 and token.isdigit():
            frames[-1].append(int(token))
        else:
            raise ValueError(f"unknown token {token!r} in ListOps expression {' '.join(tokens)!r}")
    if len(frames) > 1 or len(frames[0]) != 2:
        raise ValueError(f"a ListOps expression must be one value with balanced brackets, got {' '.join(tokens)!r}")
    return frames[0][1]


def _tree(rng: random.Random, depth: int, max_depth: int, max_args: int, tokens: list[str]) -> int:
    """Append the tokens of a random subtree to ``tokens`` and return its value (LRA's ``generate_tree``)."""
    if depth < max_depth and rng.random() <= _VALUE_P:
        op = rng.choice(OPERATORS)
        tokens.append(f"[{op}")
        args = [_tree(rng, depth + 1, max_depth, max_args, tokens) for _ in range(rng.randint(2, max_args))]
        tokens.append("]")
        return _APPLY[op](args)
    value = rng.randrange(10)
    tokens.append(str(value))
    return value


def listops(
    *,
    num_train: int = 2000,
    num_test: int = 500,
    min_length: int = 16,
    max_length: int = 128,
    max_depth: int = 6,
    max_args: int = 5,
    seed: int = 0,
) -> Splits:
    """Distinct random ListOps expressions with ``min_length <= tokens <= max_length``, labelled by their value.

    Trees are drawn as in LRA's generator (each node below ``max_depth`` is an operator with probability
    0.25, with 2 to ``max_args`` arguments, else a digit) and rejected until their length is in range.
    LRA's setting is ``min_length=500, max_length=2000, max_depth=10, max_args=10`` (about 0.3 ms per
    expression); the defaults are small for tests.

    Args:
        num_train, num_test: Number of expressions per split; no expression occurs twice.
        min_length, max_length: Length range in tokens; sequences are padded to ``max_length``.
        max_depth: Depth at which every node is a digit (the root has depth 1).
        max_args: Most arguments of an operator.
        seed: Seed of the generator.

    Returns:
        ``"tokens"`` splits with ``x`` ``(N, max_length)``, ``mask`` (True at padding) and ``y`` in 0-9;
        ``vocab`` is :data:`LISTOPS_VOCAB`.
    """
    if not 1 <= min_length <= max_length:
        raise ValueError(f"need 1 <= min_length <= max_length, got {min_length} and {max_length}")
    if max_depth < 1 or max_args < 2:
        raise ValueError(f"need max_depth >= 1 and max_args >= 2, got {max_depth} and {max_args}")
    rng = random.Random(seed)
    seen: set[tuple[str, ...]] = set()
    ids: list[list[int]] = []
    labels: list[int] = []
    while len(labels) < num_train + num_test:
        for _ in range(_MAX_REJECTIONS):
            tokens: list[str] = []
            value = _tree(rng, 1, max_depth, max_args, tokens)
            if min_length <= len(tokens) <= max_length and tuple(tokens) not in seen:
                break
        else:
            raise ValueError(
                f"found only {len(labels)} distinct ListOps expressions of {min_length}-{max_length} tokens with "
                f"max_depth={max_depth}, max_args={max_args}; widen the length range or raise the depth"
            )
        seen.add(tuple(tokens))
        ids.append(LISTOPS_VOCAB.encode(tokens))
        labels.append(value)
    x, mask = pad_sequences(ids, max_length)
    y = torch.tensor(labels)
    return Splits(
        name="listops",
        kind="tokens",
        train=TensorSplit(x=x[:num_train], mask=mask[:num_train], y=y[:num_train]),
        test=TensorSplit(x=x[num_train:], mask=mask[num_train:], y=y[num_train:]),
        description=(
            f"ListOps generated as in LRA (seed {seed}): {min_length}-{max_length} tokens, depth <= {max_depth}, "
            f"<= {max_args} arguments, {num_train} train / {num_test} test"
        ),
        classes=tuple(str(d) for d in range(10)),
        vocab=LISTOPS_VOCAB,
    )
