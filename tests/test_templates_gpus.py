"""The templates request no GPU by default, say so, and carry commented GPU lines and the
site options most sites require (account, partition, time), which sbatch ignores until a
'#' is dropped (sbatch reads only lines that start with ``#SBATCH``)."""

from __future__ import annotations

from pathlib import Path

import pytest

TEMPLATES = sorted((Path(__file__).parent.parent / "sbatch_templates").glob("*.sbatch"))


@pytest.mark.parametrize("path", TEMPLATES, ids=[p.name for p in TEMPLATES])
def test_gpu_lines_are_commented_and_the_words_match(path: Path) -> None:
    lines = path.read_text().splitlines()
    active = [line for line in lines if line.startswith("#SBATCH")]
    commented = [line for line in lines if line.startswith("##SBATCH")]
    assert not any("gpu" in line.lower() for line in active), "a template must not demand GPUs"
    assert any(line.startswith("##SBATCH --gres=gpu:") for line in commented)
    assert any(
        line.startswith(("##SBATCH --gpus-per-node=", "##SBATCH --gpus-per-task=")) for line in commented
    )
    for site in ("--account=", "--partition=", "--time="):
        assert any(line.startswith(f"##SBATCH {site}") for line in commented), site
        assert not any(line.startswith(f"#SBATCH {site}") for line in active), site
    text = path.read_text()
    assert "No GPU is requested" in text and "uses the node's GPUs" not in text
    # every commented line is a real option once uncommented (the first '#' dropped)
    for line in commented:
        option = line[1:].split()[1]
        assert option.startswith("--") and "=" in option, line
