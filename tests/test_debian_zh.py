"""bertlab data debian-zh on a tiny apt lists folder (tests/fixtures/debian-zh: real entries of
bookworm's Translation-zh_CN and Packages lists, plus the cases the builder must drop)."""
import json
import pathlib

import pytest

from bertlab.cli import main
from bertlab.data.debian_zh import build_debian_zh, description_paragraphs, split_of

LISTS = pathlib.Path(__file__).parent / "fixtures" / "debian-zh"


def _tsv(path):
    header, *rows = path.read_text(encoding="utf-8").splitlines()
    assert header == "package\tsection\tdescription"
    return [tuple(row.split("\t")) for row in rows]


def test_labelled_set_and_corpus_from_apt_lists(tmp_path):
    stats = build_debian_zh(tmp_path, LISTS, heldout_share=0.15, min_per_section=1)
    # the split is the source package's hash (0ad-data's is 0ad, abiword-common's abiword)
    assert [split_of(s, 0.15) for s in ("0ad", "abiword", "2048-qt", "apt-file", "3dchess", "apt-mirror")] == \
        ["train", "train", "dev", "dev", "test", "test"]
    train, dev, test = (_tsv(tmp_path / f"{split}.tsv") for split in ("train", "dev", "test"))
    assert [(p, s) for p, s, _ in train] == [("0ad", "games"), ("0ad-data", "games"), ("abiword-common", "editors"),
                                             ("acpi", "utils"), ("adduser", "admin")]
    assert [(p, s) for p, s, _ in dev] == [("2048-qt", "games"), ("apt-file", "admin")]
    assert [(p, s) for p, s, _ in test] == [("3dchess", "games")]  # apt-mirror: net has no training row
    text = dict((p, d) for p, _, d in train + dev + test)
    assert text["3dchess"] == ("在 3 个棋盘上玩国际象棋！ 3 个棋盘空间平行排布；96 个格，确是普通的国际象棋，只有少数地方稍有改动；"
                               "有 26 个可能方向。 AI 设计不是很完美但是足以挑战大多数高手。")
    assert "战争/经济游戏" in text["0ad"]  # a Chinese word wrapped across lines joins without a space
    assert text["0ad-data"].endswith("引擎。 本包包含 0 A.D 所需的主要数据文件。")  # " ." paragraphs
    assert stats["dropped"] == {"description repeated word for word": 1,  # 2048-qt-data
                                "no Packages entry with that description md5": 1,  # alien's stale translation
                                "section with fewer than 1 training descriptions": 1}  # apt-mirror
    assert stats["rows"] == {"train": 5, "dev": 2, "test": 1}
    assert stats["inputs"]["translations"] == [str(LISTS / "deb.debian.org_debian_dists_bookworm_main_i18n_Translation-zh%5fCN")]
    assert json.loads((tmp_path / "stats.json").read_text(encoding="utf-8")) == json.loads(json.dumps(stats))

    # the corpus: one sentence a line, a blank line between packages; held out = dev + test packages
    documents = [d.split("\n") for d in (tmp_path / "train.txt").read_text(encoding="utf-8").strip().split("\n\n")]
    assert len(documents) == 5
    assert documents[0] == ["古代战争实时策略游戏", '0 A.D. (发音"zero ey-dee") ，是一个自由、开源、跨平台的古代战争实时策略游戏。',
                            "简而言之，它是一款基于历史的战争/经济游戏，允许游戏者再体验或改写西方文明史，时间跨度为公元前500年至公元500年。",
                            "该项目雄心勃勃，包括最先进的3D图像，细致的插图，声音，以及灵活强大的可定制游戏引擎。"]
    heldout = (tmp_path / "heldout.txt").read_text(encoding="utf-8")
    assert heldout.startswith("基于数学的解谜游戏\n") and "APT 源镜像工具" in heldout and "在 3 个棋盘上玩国际象棋！\n" in heldout
    assert "国际象棋" not in (tmp_path / "train.txt").read_text(encoding="utf-8")


def test_description_paragraphs():
    field = "合成器\n 第一行没有\n 结束。second\n line\n .\n 第二段。"
    assert description_paragraphs(field) == ("合成器", ["第一行没有结束。second line", "第二段。"])


def test_cli_builds_and_names_its_inputs(tmp_path, capsys):
    assert main(["data", "debian-zh", "--lists", str(LISTS), "-o", str(tmp_path / "zh"), "--min-per-section", "1"]) == 0
    err = capsys.readouterr().err
    assert "Translation-zh%5fCN" in err and "_Packages" in err and "train 5, dev 2, test 1 rows" in err
    assert main(["data", "debian-zh", "--lists", str(LISTS), "-o", str(tmp_path / "zh")]) == 2  # no --overwrite
    assert "--overwrite" in capsys.readouterr().err


@pytest.mark.parametrize("present", ["nothing", "packages only", "no folder"])
def test_refuses_without_the_lists_and_says_how_to_fetch_them(tmp_path, capsys, present):
    lists = tmp_path / "lists"
    if present != "no folder":
        lists.mkdir()
    if present == "packages only":
        (lists / "deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages").write_text(
            (LISTS / "deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages").read_text())
    assert main(["data", "debian-zh", "--lists", str(lists), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert str(lists) in err and "apt-get update -o Acquire::Languages=zh_CN" in err
    assert not (tmp_path / "out" / "train.tsv").exists()
