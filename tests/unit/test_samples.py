"""Every file in docs/samples/ is what ``make samples`` produces from the sample's results.json.

The measurement itself cannot be repeated byte for byte; its rendering can. So each sample's
report is rendered again from its recorded results.json and compared with the committed
files, and the folder holds nothing the generator does not write.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from imbucket.bench import samples

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / samples.ROOT


def test_the_index_lists_every_sample_and_nothing_else() -> None:
    assert (SAMPLES / "README.md").read_text() == samples.index(), "run `make samples`"
    folders = {path.name for path in SAMPLES.iterdir() if path.is_dir()}
    assert folders == {sample.folder for sample in samples.SAMPLES}


@pytest.mark.parametrize("sample", samples.SAMPLES, ids=lambda sample: sample.folder)
def test_every_sample_is_the_renderers_output_of_its_results(
    sample: samples.Sample, tmp_path: Path
) -> None:
    committed = SAMPLES / sample.folder
    samples.render(committed, tmp_path)
    for name in ("results.json", "report.md"):
        assert (committed / name).read_text() == (tmp_path / name).read_text(), (
            f"docs/samples/{sample.folder}/{name} is not the renderer's output: run `make samples`"
        )
    assert sorted(p.name for p in committed.iterdir()) == sorted(p.name for p in tmp_path.iterdir())
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", (committed / "report.md").read_text())
    assert images and all((committed / image).is_file() for image in images)
