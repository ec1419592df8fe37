"""`bertlab distill` as one function a notebook can call: the teacher loaded and checked, the
student made (the teacher's every other layer, or a given folder of the same vocabulary), the data
opened (a task's files, or pretraining shards / a text file), and one distillation run trained
with `fit` (objective.py)."""
import json
import os
from dataclasses import replace

from ..interop.pretrained import resolve
from ..io import atomic_write_text
from ..progress import write
from .student import check_same_vocabulary, student_from_teacher

GENERAL_DEFAULTS = {True: (5.0, 2.0, 1.0), False: (0.0, 0.0, 1.0)}  # by whether the teacher has a masked-LM head


def distill_job(teacher, out, *, student_layers=None, student=None, train=None, dev=None, test=None, data=None,
                eval_data=None, max_seq_length=128, alpha_soft=None, alpha_hard=None, alpha_cos=None,
                overwrite=False, **settings) -> dict:
    """Distil `teacher` into a student of `student_layers` layers (or the model folder `student`)
    in the run folder `out`. Task distillation with `train` (and `dev`, `test`): the teacher is a
    folder `bertlab finetune` wrote and the student becomes one (OUT/model). General distillation
    with `data` (create-pretraining-data shards, or a text file made into shards in OUT/data): the
    teacher is a BERT folder and OUT/model a BERT folder of its kind. alpha_* None: the mode's
    default (DistilBERT's 5, 2, 1; without a teacher masked-LM head 0, 0, 1). Other keywords are
    the mode's settings (TaskDistillSettings / GeneralDistillSettings). Returns the summary."""
    if (train is None) == (data is None):
        raise ValueError("give --train FILE (task distillation, a fine-tuned teacher) or --data SHARDS_OR_TEXT "
                         "(general distillation, masked LM), one of them")
    if (student_layers is None) == (student is None):
        raise ValueError("give --student-layers N (the teacher's every other layer) or --student DIR, one of them")
    alphas = {"alpha_soft": alpha_soft, "alpha_hard": alpha_hard, "alpha_cos": alpha_cos}
    settings = {**settings, "out": os.fspath(out)}
    if train is not None:
        return task_distillation(teacher, student_layers, student, train, dev, test, alphas, overwrite, settings)
    return general_distillation(teacher, student_layers, student, data, eval_data, max_seq_length, alphas,
                                overwrite, settings)


# ---- task distillation ----------------------------------------------------------------------------
def task_distillation(teacher, student_layers, student, train, dev, test, alphas, overwrite, settings) -> dict:
    from ..finetune.predict import predict_file
    from ..finetune.setup import load_base_model, prepare_output, read_splits
    from ..finetune.tasks import task_from_state
    from ..interop.finetuned import readable_folder
    from ..interop.load import load_model
    from ..training.engine import fit
    from .objective import HEADS, TaskDistillation, TaskDistillSettings
    folder = resolve(readable_folder(teacher))
    check_families(folder, student, general=False)
    if not os.path.exists(os.path.join(folder, "task.json")):
        raise ValueError(f"--teacher {teacher}: no task.json, so not a task folder `bertlab finetune` wrote; task "
                         "distillation (--train) needs a fine-tuned teacher (its OUT/model); a pretrained BERT "
                         "is distilled with --data (general distillation)")
    loaded = load_model(folder)
    task, teacher_model, tokenizer = task_from_state(loaded, folder), loaded.model, loaded.tokenizer
    if not isinstance(teacher_model, HEADS) or task.labels is None:
        raise ValueError(f"--teacher {teacher}: a {task.name} model; task distillation needs a distribution over "
                         "labels (classify, the GLUE classification tasks, ner, multiple_choice), not regression "
                         "or squad")
    s = TaskDistillSettings(teacher=folder, **{k: v for k, v in alphas.items() if v is not None}, **settings)
    splits = read_splits(task, train, dev, test)  # the labels are the teacher's (task.json)
    task.check_labels(splits["train"], train)
    if student_layers is not None:
        student_model = student_from_teacher(teacher_model, student_layers,
                                             lambda config: task.build_model(config, init_weights=False))
    else:
        built = load_base_model(task, student, quiet=not s.progress, seed=s.seed)
        student_model, student_tokenizer = built.model, built.tokenizer
        check_same_vocabulary(tokenizer, student_tokenizer, folder, student)
        check_same_width(teacher_model, student_model, s.alpha_cos, student)
    prepare_output(s.out, s.resume, overwrite, command="distill")
    objective = TaskDistillation(task, student_model, teacher_model, tokenizer, splits["train"], splits["dev"], s)
    summary = fit(objective, s)
    del summary["model"]
    if splits["test"] and not summary["stopped_by_time"]:
        summary["test"] = predict_file(os.path.join(s.out, "model"), splits["test_path"],
                                       os.path.join(s.out, "test_predictions.jsonl"), progress=s.progress)
    atomic_write_text(os.path.join(s.out, "summary.json"), json.dumps(summary, indent=2, default=str) + "\n")
    return summary


def check_same_width(teacher, student, alpha_cos, student_name):
    a, b = teacher.config.hidden_size, student.config.hidden_size
    if alpha_cos and a != b:
        raise ValueError(f"--student {student_name}: hidden size {b}, the teacher's is {a}; the cosine between "
                         "their hidden states needs equal sizes (use --alpha-cos 0)")


def family(folder) -> str:
    """"modernbert" for a ModernBERT folder (pretrained or fine-tuned: config.json's model_type),
    else "bert"."""
    from ..io import read_json
    path = os.path.join(folder, "config.json")
    config = read_json(path) if os.path.isfile(path) else None
    return "modernbert" if isinstance(config, dict) and config.get("model_type") == "modernbert" else "bert"


KIND = {"bert": "BERT", "modernbert": "ModernBERT"}
TOKENIZERS = {"wordpiece": "WordPiece (vocab.txt)", "bpe": "byte-level BPE (tokenizer.json)"}


def reads_text_with(folder) -> str:
    """"wordpiece" for every BERT folder and a WordPiece ModernBERT (interop.hf_modernbert.reads_wordpiece),
    "bpe" for a ModernBERT folder whose tokenizer.json is byte-level BPE."""
    from ..interop.hf_modernbert import reads_wordpiece
    return "wordpiece" if family(folder) == "bert" or reads_wordpiece(folder) else "bpe"


def check_families(teacher_folder, student, general: bool):
    """Refused before any work, naming the folders: a teacher and a student that read text with
    different tokenizers (a BERT and a byte-level BPE ModernBERT: every term of the loss compares
    the two models on the same token ids; a BERT and a WordPiece ModernBERT pass here, and
    check_same_vocabulary then compares their vocabularies), and ModernBERT in general distillation
    (its data are create-pretraining-data's WordPiece shards, its student BERT's masked-LM model)."""
    folders = {"--teacher": teacher_folder, **({"--student": resolve(student)} if student is not None else {})}
    families = {flag: family(folder) for flag, folder in folders.items()}
    tokenizers = {flag: reads_text_with(folder) for flag, folder in folders.items()}
    if len(set(families.values())) > 1 and len(set(tokenizers.values())) > 1:
        t, s = families["--teacher"], families["--student"]
        raise ValueError(f"--teacher {teacher_folder} is a {KIND[t]} model and --student {folders['--student']} a "
                         f"{KIND[s]} one: they read text with different tokenizers "
                         f"({TOKENIZERS[tokenizers['--teacher']]} against {TOKENIZERS[tokenizers['--student']]}), "
                         "and distillation feeds both the same token ids (soft targets and hidden states compare "
                         "them token by token), so teacher and student must share a tokenizer; distil into a "
                         f"{KIND[t]} student (--student-layers N), or into a model of the teacher's vocabulary (a "
                         "ModernBERT that `bertlab pretrain --recipe modernbert` trained on the teacher's WordPiece "
                         "vocabulary shares a BERT's)")
    if general and "modernbert" in families.values():
        flag = next(f for f, kind in families.items() if kind == "modernbert")
        raise ValueError(f"{flag} {folders[flag]}: a ModernBERT model; general distillation (--data) reads "
                         "WordPiece pretraining shards into BERT's masked-LM model and does not take ModernBERT "
                         "yet; distil a fine-tuned ModernBERT teacher with --train (task distillation)")


# ---- general distillation ---------------------------------------------------------------------------
def load_teacher(folder):
    """The LoadedModel of a BERT folder as a BertForPreTraining, extra "has_masked_lm_head" added. A
    folder without the masked-LM head (a bare encoder such as all-MiniLM-L6-v2) leaves the head
    random: never used."""
    from ..interop.pretrained import check_layers_used, load_pretrained
    from ..models import BertForPreTraining
    from ..models.accelerate import accelerate
    loaded = load_pretrained(folder, BertForPreTraining, strict=False)
    report = loaded.extra["report"]
    encoder_missing = [n for n in report.new if not n.startswith(("mlm.", "nsp."))]
    if encoder_missing or report.mismatched:
        raise ValueError(f"{folder}: its weights do not fit its config as a BERT:\n{report}")
    check_layers_used(report, folder, loaded.model.config)
    loaded.extra["has_masked_lm_head"] = not any(n.startswith("mlm.") for n in report.new)
    accelerate(loaded.model)  # the teacher's forward runs every step (the student is fit()'s, accelerated there)
    return loaded


def general_alphas(alphas: dict, has_head: bool, teacher) -> dict:
    """The weights given, the others at the mode's defaults; soft targets without a head refused."""
    resolved = {k: v if v is not None else d for (k, v), d in zip(alphas.items(), GENERAL_DEFAULTS[has_head])}
    if not any(resolved.values()):
        raise ValueError("alpha_soft, alpha_hard and alpha_cos are all 0: the student would learn nothing")
    if not has_head:
        if resolved["alpha_soft"]:
            raise ValueError(f"--teacher {teacher}: has no masked-LM head (no cls.predictions.* weights), so it "
                             "gives no soft targets over the vocabulary: use --alpha-soft 0")
        write(f"{teacher}: no masked-LM head, so no soft targets: the student learns the teacher's hidden states "
              f"(cosine, weight {resolved['alpha_cos']}), reading the original tokens"
              + (f", and masked LM with a new head (weight {resolved['alpha_hard']})" if resolved["alpha_hard"] else ""))
    return resolved


def general_distillation(teacher, student_layers, student, data, eval_data, max_seq_length, alphas, overwrite,
                         settings) -> dict:
    from ..training.checkpoint import check_resume
    from ..training.engine import fit
    from .objective import GeneralDistillation, GeneralDistillSettings
    folder = resolve(teacher)
    check_families(folder, student, general=True)
    if os.path.exists(os.path.join(folder, "task.json")):
        raise ValueError(f"--teacher {teacher}: a fine-tuned task folder; general distillation (--data) needs a "
                         "pretrained BERT folder, task distillation --train")
    loaded_teacher = load_teacher(folder)
    teacher_model, tokenizer = loaded_teacher.model, loaded_teacher.tokenizer
    has_head = loaded_teacher.extra["has_masked_lm_head"]
    if student_layers is not None:
        from ..models import BertForPreTraining
        student_model = student_from_teacher(teacher_model, student_layers,
                                             lambda config: BertForPreTraining(config, init_weights=False))
    else:
        loaded_student = load_teacher(resolve(student))
        student_model, student_tokenizer = loaded_student.model, loaded_student.tokenizer
        check_same_vocabulary(tokenizer, student_tokenizer, folder, student)
    weights = general_alphas(alphas, has_head, teacher)
    if student is not None:
        check_same_width(teacher_model, student_model, weights["alpha_cos"], student)
    # the settings checked before anything is written; the shard folders filled in below
    s = GeneralDistillSettings(teacher=folder, data=data, eval_data=eval_data, model=student_model.config,
                               **weights, **settings)
    check_resume(settings["out"], settings.get("resume", False), overwrite, outputs=("data", "eval_data"),
                 command="distill")
    data = shards_for(data, os.path.join(settings["out"], "data"), tokenizer, max_seq_length, "--data")
    if eval_data is not None:
        eval_data = shards_for(eval_data, os.path.join(settings["out"], "eval_data"), tokenizer, max_seq_length,
                               "--eval-data")
    s = replace(s, data=data, eval_data=eval_data)
    return fit(GeneralDistillation(s, student_model, teacher_model, tokenizer, has_head), s)


def shards_for(path, made, tokenizer, max_seq_length, flag) -> str:
    """A shard folder made with the teacher's vocabulary: `path` itself (checked), or, for a text
    file (one sentence a line, a blank line between documents), its instances written to `made`
    (RoBERTa's full sentences, dynamic masks; kept for --resume)."""
    from ..pretraining.objective import open_shards
    if os.path.isfile(path):
        from ..pretraining.create import create_pretraining_data
        from ..pretraining.instances import InstanceOptions
        if not os.path.exists(os.path.join(made, "meta.json")):
            options = InstanceOptions(max_seq_length=max_seq_length, dupe_factor=1, mode="full-sentences",
                                      dynamic_masking=True)
            create_pretraining_data([path], made, tokenizer, options, overwrite=True, progress_bar=False)
        path = made
    vocab = open_shards(path, flag).vocab.id_to_token
    if vocab != tokenizer.vocab.id_to_token:
        raise ValueError(f"{flag} {path}: its vocab.txt is not the teacher's; make the shards with "
                         "`bertlab create-pretraining-data --vocab TEACHER/vocab.txt`")
    return path
