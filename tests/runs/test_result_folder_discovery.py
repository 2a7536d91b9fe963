"""The one discovery of LoadGen result folders: nested folders, links, loops."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import DATA
from tokenwatch.runs.loading import load_run
from tokenwatch.runs.result_folders import find_summary_folders, summarize_result_dirs

GPU0 = (
    DATA / "sources" / "loadgen" / "asustek-8xmi325x-offline" / "llama2-70b_offline_performance_run_1_gpu_0"
)
GPU0_TOKENS_PER_S = 4103.7  # its summary's "Tokens per second" (realdata SOURCES.md section A)

needs_symlinks = pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links on this system")


def _node(folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(GPU0 / "mlperf_log_summary.txt", folder)
    return folder


def test_a_folder_and_its_subfolder_are_two_nodes(tmp_path: Path) -> None:
    outer = _node(tmp_path / "rack" / "A")
    inner = _node(outer / "B")
    assert find_summary_folders(tmp_path / "rack") == [outer, inner]
    run = load_run(tmp_path / "rack")
    assert [n.name for n in run.summary.nodes] == ["A", "A/B"]
    assert run.summary.tokens_per_s == pytest.approx(2 * GPU0_TOKENS_PER_S)
    assert run.provenance.config["result folders"] == 2


@needs_symlinks
def test_a_linked_folder_outside_the_tree_is_a_node(tmp_path: Path) -> None:
    elsewhere = _node(tmp_path / "scratch" / "job42")
    rack = tmp_path / "rack"
    _node(rack / "node00")
    (rack / "node01").symlink_to(elsewhere, target_is_directory=True)
    summary, _ = summarize_result_dirs([rack], None)
    assert [n.name for n in summary.nodes] == ["node00", "node01"]


@needs_symlinks
def test_a_node_reached_twice_counts_once_and_a_link_loop_ends(tmp_path: Path) -> None:
    rack = tmp_path / "rack"
    node = _node(rack / "node00")
    (rack / "alias").symlink_to(node, target_is_directory=True)  # sorts first: the link is kept
    (node / "loop").symlink_to(rack, target_is_directory=True)
    summary, _ = summarize_result_dirs([rack], None)
    assert len(summary.nodes) == 1
    assert summary.tokens_per_s == pytest.approx(GPU0_TOKENS_PER_S)
