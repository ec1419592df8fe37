"""One flag vocabulary: the training commands spell, type and store their shared flags the same way,
and the spellings they had before still parse (hidden) to the same place."""
import argparse

import pytest

from bertlab.cli import build_parser
from bertlab.cli.args import RUN_FLAGS

TRAINING = {  # command: the shared flags it has no use for
    "pretrain": set(),
    "finetune": {"save_every"},  # it saves a checkpoint at each evaluation
    "gpt-train": {"grad_clip"},
    "translate-train": {"batch_size"},  # it batches by --max-tokens
    "unilm-train": set(),
    "distill": set(),
}
FOLDER_WRITERS = [["vocab"], ["create-pretraining-data"], ["data", "english-corpus"], ["data", "python-docs"],
                  ["data", "gettext"], ["convert"], ["data", "debian-zh"],
                  ["data", "debian-synopses"]]


def _subparser(*path):
    parser = build_parser()
    for name in path:
        parser = parser._subparsers._group_actions[0].choices[name]
    return parser


def _visible(parser, dest):
    return [a for a in parser._actions if a.dest == dest and a.help is not argparse.SUPPRESS]


@pytest.mark.parametrize("command", sorted(TRAINING))
def test_every_training_command_spells_the_shared_flags_alike(command):
    parser = _subparser(command)
    expected = {"out": ["-o", "--out"]} | {dest: [flag] for dest, (flag, _, _) in RUN_FLAGS.items()
                                           if dest not in TRAINING[command]}
    for dest, flags in expected.items():
        actions = _visible(parser, dest)
        assert [a.option_strings for a in actions] == [flags], (command, dest)
        keywords = RUN_FLAGS.get(dest, (None, None, {}))[2]
        assert actions[0].type is keywords.get("type"), (command, dest)


@pytest.mark.parametrize("command", sorted(TRAINING))
def test_old_spellings_parse_to_the_new_dest(command):
    parser = build_parser()
    old = {"--output": ("out", "x"), "--output-dir": ("out", "x"), "--eval-interval": ("eval_every", 7),
           "--save-interval": ("save_every", 7), "--clip-norm": ("grad_clip", 0.5)}
    required = {"pretrain": ["--data", "d"], "finetune": ["--task", "classify", "--model", "m"],
                "gpt-train": ["f.txt"], "translate-train": [], "unilm-train": [],
                "distill": ["--teacher", "t", "--student-layers", "3"]}[command]
    for spelling, (dest, value) in old.items():
        if dest in TRAINING[command]:
            continue
        with_out = [] if dest == "out" else ["-o", "run"]
        args = parser.parse_args([command, *required, *with_out, spelling, str(value)])
        assert getattr(args, dest) == value, (command, spelling)
        assert all(not a.dest.endswith(("interval", "output", "output_dir", "clip_norm"))
                   for a in _subparser(command)._actions)


@pytest.mark.parametrize("path", FOLDER_WRITERS, ids=" ".join)
def test_commands_writing_a_folder_take_out_and_the_old_output_dir(path):
    assert [a.option_strings for a in _visible(_subparser(*path), "out")] == [["-o", "--out"]]
    extra = {"gettext": ["--lang", "de"], "python-docs": [], "english-corpus": [], "debian-zh": [],
             "debian-synopses": []}.get(path[-1], ["x.txt"])
    if path == ["create-pretraining-data"]:
        extra += ["--vocab", "v.txt"]
    for spelling in ("-o", "--out", "--output-dir"):
        assert build_parser().parse_args([*path, *extra, spelling, "there"]).out == "there"


def test_the_run_folder_is_still_required():
    with pytest.raises(SystemExit):
        build_parser().parse_args(["translate-train", "--data", "d"])
