"""Every fine-tuning task by name, for `bertlab finetune --task NAME` and for rebuilding a task from
a model folder's task.json. Importing this module does not import torch (the command line builds
its parser from TASK_NAMES); a task's module is imported when the task is made."""
import importlib

from .glue import ALIASES, GLUE, glue_task

TASKS = {"classify": ("classification", "SequenceClassificationTask"),
         "regression": ("classification", "RegressionTask"),
         "ner": ("ner", "TokenClassificationTask"),
         "squad": ("squad", "QuestionAnsweringTask"),
         "multiple_choice": ("multiple_choice", "MultipleChoiceTask"),
         "swag": ("multiple_choice", "MultipleChoiceTask"),
         "relation": ("relation", "RelationTask")}
TASK_NAMES = sorted(TASKS) + sorted(GLUE)
WINDOWED = ("classify", "regression", "ner", "squad", *GLUE)  # tasks that read long inputs in windows


def make_task(task: str, labels=None, **options):
    """A task from its name and the options saved in task.json (or given on the command line);
    without max_seq_length, the task's own default (128; 384 for squad)."""
    name = str(task).lower()
    if name in GLUE or name in ALIASES:
        keep = {k: v for k, v in options.items() if k in ("doc_stride", "max_seq_length", "long_inputs")}
        return glue_task(name, **keep)
    if name not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASK_NAMES)}")
    module, class_name = TASKS[name]
    task_class = getattr(importlib.import_module(f".{module}", __package__), class_name)
    try:
        return task_class(labels=labels, **options)
    except TypeError as e:  # an option this task does not take (a hand-edited task.json)
        raise ValueError(f"task {name!r}: {e}") from None


def task_from_state(state: dict, where="task.json"):
    """The Task a fine-tuned folder's task.json (`state`, interop.finetuned) describes; `where`
    names the file in errors. Accepts a LoadedModel of kind "finetuned" for `state`."""
    if hasattr(state, "extra"):  # a LoadedModel
        state = state.extra["task_state"]
    single_text = state.get("text_b") is None and state["task"].lower() not in (
        "ner", "squad", "multiple_choice", "swag", "relation")
    if single_text and "long_inputs" not in state:
        state = {**state, "long_inputs": "windows"}  # saved before the option: trained on windows
    try:
        return make_task(**state)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
