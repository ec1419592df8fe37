"""The student of DistilBERT (Sanh et al., 2019): the teacher's architecture with fewer layers,
initialised from the teacher itself — its embeddings, every other Transformer layer (teacher layers
0, 2, 4, ...) and its heads copied — so that distillation starts from a network that already
computes something close to the teacher's function instead of from random weights.
"""
import re
from dataclasses import replace

import torch

LAYER_KEY = re.compile(r"(^|\.)layers\.(\d+)\.")


def teacher_layers_for(student_layers: int, teacher_layers: int) -> list[int]:
    """The teacher layer each student layer starts from: i * L // N, which for N = L/2 is every other
    layer (0, 2, 4, ...), DistilBERT's choice; for other N the same even spread, always starting at
    the first layer (the one that reads the copied embeddings)."""
    if not isinstance(student_layers, int) or isinstance(student_layers, bool) or student_layers < 1:
        raise ValueError(f"--student-layers {student_layers!r}: must be a whole number of at least 1")
    if student_layers >= teacher_layers:
        raise ValueError(f"--student-layers {student_layers}: the teacher has {teacher_layers} layers; a student "
                         f"must have fewer (1 to {teacher_layers - 1}) to be smaller and faster than its teacher")
    return [i * teacher_layers // student_layers for i in range(student_layers)]


def student_from_teacher(teacher: torch.nn.Module, student_layers: int, build) -> torch.nn.Module:
    """A copy of `teacher` with `student_layers` layers: `build(config)` makes the empty model of the
    teacher's class (e.g. task.build_model), and every tensor is copied from the teacher, layer i
    from teacher layer teacher_layers_for(...)[i]; embeddings, pooler and heads as they are."""
    picked = teacher_layers_for(student_layers, teacher.config.num_hidden_layers)
    student = build(student_config(teacher.config, picked))
    source = teacher.state_dict()

    def teacher_key(key):
        return LAYER_KEY.sub(lambda m: f"{m.group(1)}layers.{picked[int(m.group(2))]}.", key, count=1)

    state = {key: source[teacher_key(key)] for key in student.state_dict()}
    student.load_state_dict(state, strict=True)  # every tensor copied: nothing is left random
    return student


def student_config(config, picked: list[int]):
    """The teacher's config with the layers `picked`; a ModernBERT student's layers keep the
    attention span (global or local) and so the rotary base of the teacher layer each is copied
    from (layer_types), whatever global_attn_every_n_layers would give at their new places."""
    changes = {"num_hidden_layers": len(picked)}
    if hasattr(config, "is_global"):  # ModernBertConfig
        changes["layer_types"] = ["full_attention" if config.is_global(p) else "sliding_attention" for p in picked]
    return replace(config, **changes)


def check_same_vocabulary(teacher_tokenizer, student_tokenizer, teacher_name, student_name):
    """Soft targets over the vocabulary and hidden states token by token compare the same ids only
    if both models read text into the same word pieces: the vocabularies and casing must be equal
    (two ModernBERT models: the same tokenizer.json)."""
    if hasattr(teacher_tokenizer, "spec") or hasattr(student_tokenizer, "spec"):  # tokenizer.json (ModernBERT)
        if getattr(teacher_tokenizer, "spec", None) != getattr(student_tokenizer, "spec", None):
            raise ValueError(f"the teacher {teacher_name} and the student {student_name} have different "
                             "tokenizer.json files; a student must read text into the teacher's tokens")
        return
    a, b = teacher_tokenizer.vocab.id_to_token, student_tokenizer.vocab.id_to_token
    if a != b:
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        where = (f"id {first} is {a[first]!r} in the teacher, {b[first]!r} in the student" if first < min(len(a), len(b))
                 else f"{len(a)} tokens against {len(b)}")
        raise ValueError(f"the teacher {teacher_name} and the student {student_name} have different vocabularies "
                         f"(vocab.txt: {where}); a student must read text into the teacher's word pieces")
    if teacher_tokenizer.do_lower_case != student_tokenizer.do_lower_case:
        raise ValueError(f"the teacher {teacher_name} is {'un' if teacher_tokenizer.do_lower_case else ''}cased and "
                         f"the student {student_name} is not; they must tokenize text alike")
