"""Regenerate summaries.txt: the first sentence of the docstring of every public function, class
and method in CPython's standard library, one per line as "qualified.name: summary".

Run with the interpreter whose library you want (the shipped file came from CPython 3.11.7):
    python data/python-docs/make_summaries.py > data/python-docs/summaries.txt
"""
import importlib
import inspect
import re
import sys
import warnings

SKIP = ("antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "test", "lib2to3", "ensurepip",
        "pydoc_data", "__phello__", "xxsubtype", "msilib", "winreg", "winsound", "_")


def first_sentence(doc: str) -> str | None:
    paragraph = re.split(r"\n\s*\n", inspect.cleandoc(doc).strip())[0]
    text = " ".join(paragraph.split())
    m = re.match(r"(.+?[.!?])(\s|$)", text)
    text = m.group(1) if m else text
    if not 20 <= len(text) <= 200 or text.startswith(("Return self", "Implement ", "See help(", "Create and return")):
        return None
    if re.match(r"^[\w.]+\(.*\)", text):  # a signature line, not prose
        return None
    return text


def public_members(module):
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(obj):
            yield f"{module.__name__}.{name}", obj
            for attr, member in sorted(vars(obj).items()):
                if not attr.startswith("_") and callable(member):
                    yield f"{module.__name__}.{name}.{attr}", member
        elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
            yield f"{module.__name__}.{name}", obj


def main():
    warnings.simplefilter("ignore")
    seen, lines = set(), []
    for module_name in sorted(sys.stdlib_module_names):
        if module_name.startswith(SKIP):
            continue
        try:
            module = importlib.import_module(module_name)
        except Exception:
            continue
        for qualified, obj in public_members(module):
            summary = first_sentence(getattr(obj, "__doc__", None) or "")
            if summary and summary not in seen:
                seen.add(summary)
                lines.append(f"{qualified}: {summary}")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
