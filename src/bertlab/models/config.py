"""What every model config shares: a frozen dataclass whose field names are the checkpoint's own
config.json keys, read leniently (unknown keys ignored) but typed (a known key of the wrong JSON
type is refused by name), sized before any model is built from it, and written atomically."""
import copy
import dataclasses
import json
import types

from .. import validate


class JsonConfig:
    @classmethod
    def from_dict(cls, d: dict):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if not isinstance(d, dict):
            raise ValueError(f"expected an object of {cls.__name__} fields, found {type(d).__name__}")
        from ..io import check_types
        check_types(d, {name: _json_types(f.type) for name, f in fields.items() if _json_types(f.type)}, None)
        return cls(**{k: v for k, v in d.items() if k in fields})

    def parameter_count(self) -> int:
        """Weights and buffers the model built from this config holds, counted from the config alone
        (each family overrides it); 0 means not counted."""
        return 0

    def check_size(self, training: bool = False):
        """Refuse, before anything is allocated, a config whose model would not fit the memory limit
        (validate.check_model_size), naming the field that makes it large: the one whose default
        value would shrink the model most."""
        count = self.parameter_count()
        if count * validate.BYTES_PER_PARAMETER * (4 if training else 1) <= validate.model_memory_limit()[0]:
            return
        culprit, smallest = None, count
        for f in dataclasses.fields(self):
            default = f.default if f.default is not dataclasses.MISSING else None
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or not (default is None or isinstance(default, int)):
                continue
            shadow = copy.copy(self)  # not re-validated: only counted
            object.__setattr__(shadow, f.name, default)
            if shadow.parameter_count() < smallest:
                culprit, smallest = f.name, shadow.parameter_count()
        validate.check_model_size(self, count, culprit, training)

    def to_dict(self, hf: bool = True) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json_file(cls, path):
        from ..io import read_json
        values = read_json(path)
        try:
            return cls.from_dict(values)
        except TypeError as e:  # a value of the wrong kind for a field
            raise ValueError(f"{path}: not a valid {cls.__name__} ({e})") from None
        except ValueError as e:  # a field out of range, or fields that contradict each other
            raise ValueError(f"{path}: {e}") from None

    def to_json_file(self, path, hf: bool = True, **extra):
        from ..io import atomic_write_text
        atomic_write_text(path, json.dumps({**self.to_dict(hf), **extra}, indent=2, sort_keys=True) + "\n")


def _json_types(annotation) -> tuple:
    """The JSON types a field of this annotation accepts (int | None -> (int, NoneType))."""
    kinds = annotation.__args__ if isinstance(annotation, types.UnionType) else (annotation,)
    allowed = tuple(k for k in kinds if k in (int, float, str, bool, type(None), list, dict))
    return allowed if len(allowed) == len(kinds) else ()
