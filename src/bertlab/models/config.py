"""What every model config shares: a frozen dataclass whose field names are the checkpoint's own
config.json keys, read leniently (unknown keys ignored) and written atomically."""
import dataclasses
import json


class JsonConfig:
    @classmethod
    def from_dict(cls, d: dict):
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

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
