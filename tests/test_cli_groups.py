"""`bertlab --help` lists the commands by what a user wants to do (cli.GROUPS), as `git help` does:
every command in exactly one group, each with its one-line purpose, the groups in order."""
import pytest

from bertlab.cli import COMMANDS, GROUPS, build_parser, main


def _name(module):
    return module.__name__.rsplit(".", 1)[1].replace("_", "-")


def test_every_command_is_in_exactly_one_group():
    grouped = [_name(m) for _, modules in GROUPS for m in modules]
    registered = list(build_parser()._subparsers._group_actions[0].choices)
    assert sorted(grouped) == sorted(set(grouped)) == sorted(registered) == sorted(map(_name, COMMANDS))
    assert len(registered) == 24


def test_help_prints_the_groups_in_order_with_each_command_s_purpose(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: bertlab [-h] [--version] COMMAND ...\n")
    titles = [out.index(f"\n{title}\n") for title, _ in GROUPS]
    assert titles == sorted(titles)
    helps = {a.dest: a.help for a in build_parser()._subparsers._group_actions[0]._choices_actions}
    for (title, modules), start, end in zip(GROUPS, titles, titles[1:] + [out.index("\noptions:")]):
        section = out[start:end]
        for module in modules:
            name = _name(module)
            assert f"\n   {name} " in section or f"\n   {name}\n" in section, (title, name)
            assert " ".join(helps[name].split()[:4]) in " ".join(section.split()), name  # its purpose, wrapped
    assert out.count("\n   tokenize ") == 1 and "{tokenize," not in out  # no second, flat list of the commands


def test_a_command_s_own_usage_still_names_it():
    sub = build_parser()._subparsers._group_actions[0].choices["distill"]
    assert sub.format_usage().startswith("usage: bertlab distill ")
