"""Checks of numeric settings, shared by the command line (as its flag types) and the library
(settings dataclasses call them in __post_init__), so a bad number is refused in one place with
its name and value, never turned into a silently wrong run."""
import math
import numbers


def check_number(name: str, value, *, integer: bool = False, minimum=None, maximum=None,
                 exclusive_minimum: bool = False, exclusive_maximum: bool = False, optional: bool = False):
    """Return `value` if it is a finite number (an int when `integer`) within [minimum, maximum]
    (an end excluded when `exclusive_minimum` / `exclusive_maximum`); else raise ValueError naming
    `name` and `value`."""
    if value is None and optional:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or (integer and not isinstance(value, numbers.Integral)):
        raise ValueError(f"{name} {value!r}: must be {'a whole number' if integer else 'a number'}")
    if not math.isfinite(value):
        raise ValueError(f"{name} {value!r}: must be a finite number")
    if minimum is not None and (value <= minimum if exclusive_minimum else value < minimum):
        raise ValueError(f"{name} {value!r}: must be {'more than' if exclusive_minimum else 'at least'} {minimum}")
    if maximum is not None and (value >= maximum if exclusive_maximum else value > maximum):
        raise ValueError(f"{name} {value!r}: must be {'less than' if exclusive_maximum else 'at most'} {maximum}")
    return value


def positive_int(name, value, optional=False):
    """Batch sizes, steps, lengths, vocabulary sizes: 1 or more."""
    return check_number(name, value, integer=True, minimum=1, optional=optional)


def nonnegative_int(name, value, optional=False):
    return check_number(name, value, integer=True, minimum=0, optional=optional)


def positive_float(name, value, optional=False):
    """Learning rates, minutes, epochs: more than 0, finite."""
    return check_number(name, value, minimum=0, exclusive_minimum=True, optional=optional)


def nonnegative_float(name, value, optional=False):
    """Weight decay, clip norms (0 = off), temperatures (0 = greedy)."""
    return check_number(name, value, minimum=0, optional=optional)


def fraction(name, value, optional=False):
    """Proportions and probabilities: 0 to 1."""
    return check_number(name, value, minimum=0, maximum=1, optional=optional)


def positive_fraction(name, value, optional=False):
    """Probabilities that must leave something to do: top-p, the masked share. More than 0, at most 1."""
    return check_number(name, value, minimum=0, maximum=1, exclusive_minimum=True, optional=optional)


def fraction_below_one(name, value, optional=False):
    """Dropout, label smoothing, held-out shares: 0 or more, less than 1 (1 would leave nothing)."""
    return check_number(name, value, minimum=0, maximum=1, exclusive_maximum=True, optional=optional)


def check_fields(settings, rules: dict):
    """Apply `rules` ({field: check}) to a settings object's fields: the library-level check that
    a Python caller gets even without the command line."""
    for field, check in rules.items():
        check(field, getattr(settings, field))
