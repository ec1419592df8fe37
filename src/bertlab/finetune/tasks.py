"""Every fine-tuning task by name, for `bertlab finetune --task NAME` and for rebuilding a task from
a model folder's task.json."""
from .classification import RegressionTask, SequenceClassificationTask
from .glue import ALIASES, GLUE, glue_task


def _ner(**kw):
    from .ner import TokenClassificationTask
    return TokenClassificationTask(**kw)


def _squad(**kw):
    from .squad import QuestionAnsweringTask
    return QuestionAnsweringTask(**kw)


def _multiple_choice(**kw):
    from .multiple_choice import MultipleChoiceTask
    return MultipleChoiceTask(**kw)


TASKS = {"classify": SequenceClassificationTask, "regression": RegressionTask, "ner": _ner, "squad": _squad,
         "multiple_choice": _multiple_choice, "swag": _multiple_choice}
TASK_NAMES = sorted(TASKS) + sorted(GLUE)


def make_task(task: str, labels=None, **options):
    """A task from its name and the options saved in task.json (or given on the command line);
    without max_seq_length, the task's own default (128; 384 for squad)."""
    name = task.lower()
    if name in GLUE or name in ALIASES:
        keep = {k: v for k, v in options.items() if k in ("doc_stride", "max_seq_length")}
        return glue_task(name, **keep)
    if name not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASK_NAMES)}")
    return TASKS[name](labels=labels, **options)
