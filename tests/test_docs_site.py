"""The docs site builds with `mkdocs build --strict`: a broken link or anchor, a page missing from the
nav, an API-reference entry whose function is gone, or a notes picture the code can no longer draw
fails here, not on a reader's screen. Skipped only where MkDocs is not installed (the [test] and
[docs] extras install it)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocs", reason="MkDocs is not installed (pip install -e '.[docs]'); the site is not built")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
                           "-d", str(out)], cwd=REPO, env=env, capture_output=True, text=True)
    problems = [line for line in done.stderr.splitlines() if "WARNING" in line or "ERROR" in line or "Aborted" in line]
    assert done.returncode == 0, "\n".join(problems) or done.stderr[-4000:]
    return out


def test_every_page_is_built_and_searchable(site):
    pages = sorted(p.relative_to(REPO / "docs").with_suffix("").as_posix()
                   for p in (REPO / "docs").rglob("*.md"))
    assert "design/architecture" in pages and "results/index" in pages and "notes" in pages
    for page in pages:
        where = site / ("" if page == "index" else page.removesuffix("/index")) / "index.html"
        assert where.is_file(), f"docs/{page}.md was not built"
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    assert any("fill-mask" in doc["text"] for doc in index["docs"])  # the search box finds the commands


def test_the_notes_pictures_are_drawn_and_shown(site):
    html = (site / "notes" / "index.html").read_text(encoding="utf-8")
    for name in ("positional_encoding.png", "masks.png", "it_attention.png"):
        picture = site / "pictures" / "notes" / name
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert picture.stat().st_size < 400_000, name  # small enough for a page
        assert f"pictures/notes/{name}" in html, name


def test_the_api_reference_comes_from_the_docstrings(site):
    html = (site / "guide" / "api-reference" / "index.html").read_text(encoding="utf-8")
    for name in ("bertlab.interop.load.load_model", "bertlab.finetune.job.finetune_job", "bertlab.training.engine.fit"):
        assert f'id="{name}"' in html, name


def test_the_readmes_link_only_to_files_that_exist():
    """MkDocs checks the links inside docs/; the two READMEs live outside it."""
    for readme in ("README.md", "README.zh-CN.md"):
        text = (REPO / readme).read_text(encoding="utf-8")
        links = [link.split("#")[0] for link in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in link]
        assert links, readme
        missing = [link for link in links if not (REPO / link).exists()]
        assert not missing, f"{readme}: {missing}"
