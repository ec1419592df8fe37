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


# ---- how large a model may be, checked from its config before any tensor is allocated ----------

BYTES_PER_PARAMETER = 4  # float32 weights; training adds gradients and Adam's two moments (4x)
_model_memory_limit: int | None = None  # bytes; None: half the machine's physical memory


def set_model_memory_limit(gigabytes: float | None):
    """The limit a config's weights (and, for training, their gradients and optimizer state) may
    imply; the command line's --max-model-gb. None restores the default, half the machine's memory:
    loading holds the file's tensors and the model's at once, and inference needs room beside them."""
    global _model_memory_limit
    _model_memory_limit = None if gigabytes is None else int(positive_float("--max-model-gb", gigabytes) * 1e9)


def model_memory_limit() -> tuple[int, str]:
    """(bytes, where the number comes from)."""
    if _model_memory_limit is not None:
        return _model_memory_limit, "--max-model-gb"
    import os
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2, "half this machine's memory"
    except (ValueError, OSError, AttributeError):  # no sysconf: a fixed, generous default
        return 64 * 10**9, "the default limit"


def check_model_size(config, parameters: int, culprit: str | None, training: bool = False):
    """Refuse a config whose `parameters` (weights and buffers, counted from the config alone) need
    more memory than the limit, naming the field that makes it so (`culprit`) and both sizes. A
    config.json of 100,000 layers would otherwise be built layer by layer toward tens of GB."""
    factor = 4 if training else 1
    need = parameters * BYTES_PER_PARAMETER * factor
    limit, source = model_memory_limit()
    if need <= limit:
        return
    field = f"{culprit} {getattr(config, culprit)!r} makes " if culprit else ""
    what = "to train (weights, gradients and Adam's two moments in float32)" if training else "in float32"
    raise ValueError(f"{field}a model of {parameters:,} parameters, {need / 1e9:,.1f} GB {what}, more than "
                     f"{limit / 1e9:,.1f} GB ({source}); pass --max-model-gb to allow it")


def check_memory(what: str, nbytes: int, advice: str = "pass --max-model-gb to allow it"):
    """Refuse, before it is allocated, memory that no model config counts (word vectors of
    vocabulary x dimension, a beam search's cache of beam x batch x length) when it passes the
    same limit as a model's weights (model_memory_limit: --max-model-gb, else half this machine's
    memory). `what` says what needs it and what makes it so large; `advice` how to need less."""
    limit, source = model_memory_limit()
    if nbytes <= limit:
        return
    raise ValueError(f"{what}: {nbytes / 1e9:,.1f} GB, more than {limit / 1e9:,.1f} GB ({source}); {advice}")


# word2vec's --window: the largest half-width of a window around a word. Useful windows are 2 to 15
# (word2vec.c and gensim default to 5); each step's work and its CBOW context array (batch words x
# 2 x window) grow with it, and a window wider than its sentence adds nothing but that cost: gensim
# cuts sentences at 10,000 words, so a half-width past 1,000 covers more than any real context.
# Refused above this rather than clamped: clamping would change the reduced-window draw
# (uniform in 1..window) and so silently train other vectors than the ones asked for.
MAX_WORD2VEC_WINDOW = 1000


def word2vec_window(name, value, optional=False):
    return check_number(name, value, integer=True, minimum=1, maximum=MAX_WORD2VEC_WINDOW, optional=optional)


# Beam search keeps `beam` hypotheses a sentence, each with its own key/value cache and its share of
# the (rows x vocabulary) scores of every step. Translation quality stops improving by beams of
# 5-50 and then falls (Koehn & Knowles 2017, "six challenges"); past 1,024 a search is not a
# search setting but a memory accident. The memory a beam really implies depends on the model, the
# batch and the lengths, and is checked as well (check_memory) once the model is loaded.
MAX_BEAM = 1024


def beam_size(name, value, optional=False):
    return check_number(name, value, integer=True, minimum=1, maximum=MAX_BEAM, optional=optional)
