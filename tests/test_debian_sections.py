"""data/debian-packages/make_sections.py on a small hand-written Packages index."""
import importlib.util
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("make_sections", ROOT / "data/debian-packages/make_sections.py")
make_sections = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_sections)

INDEX = """Package: tanks
Section: games
Description: multiplayer tank battle game
 A long description
 .
 with paragraphs.

Package: tanks-data
Source: tanks
Section: games
Description: multiplayer tank battle game (data files)

Package: tanks-gtk
Source: tanks (1.0-1)
Section: games
Description: multiplayer tank battle game -- GTK front end

Package: python3-foo
Section: python
Description: a library left out with its section

Package: audio-tool
Section: contrib/sound
Description: Multiplayer TANK battle game

Package: mixer
Section: sound
Description: audio mixer for the desktop
"""


def test_synopses_sections_companions_duplicates_and_source_split(tmp_path):
    (tmp_path / "Packages").write_text(INDEX)
    stats = make_sections.build(str(tmp_path / "Packages"), str(tmp_path / "out"))
    rows = {}
    for split in ("train", "dev", "test"):
        lines = (tmp_path / "out" / f"{split}.tsv").read_text().splitlines()
        assert lines[0] == "package\tsection\tdescription"
        rows.update({line.split("\t")[0]: (split, *line.split("\t")[1:]) for line in lines[1:]})
    assert set(rows) == {"tanks", "tanks-gtk", "mixer"}  # -data companion, python section, duplicate dropped
    assert rows["tanks"][1:] == ("games", "multiplayer tank battle game")
    assert rows["tanks"][0] == rows["tanks-gtk"][0]  # one source, one split
    assert rows["mixer"][1] == "sound"
    assert stats["skipped"] == {"companion package": 1, "duplicate synopsis": 1}
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["skipped"] == stats["skipped"]
