"""`mmrag eval run webqa --executor ray` on the real two-node loopback cluster (the `cluster`
fixture): each node's worker builds its own pipeline from the sample index and the embedded
models, and the submission must be the one a local run writes, byte for byte, after a Ctrl-C
and a `--resume` on the cluster, and (slow) after a worker node is lost mid-run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmrag.evaluation.runs.checkpoint import partial_path
from tests.helpers import (
    MMRAG,
    assert_one_line_error,
    free_port,
    lose_node_when,
    run_mmrag,
    run_on_loopback,
    start_on_loopback,
    two_node_cluster,
)
from tests.test_eval_run import complete_lines, interrupt_after, table_rows, webqa_args

QUESTION_COUNT = 16
QUESTIONS = ("--limit", str(QUESTION_COUNT))


@pytest.fixture(scope="module")
def local_run(sample_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("local-run") / "preds.json"
    result = run_mmrag(*webqa_args(sample_index, out, *QUESTIONS))
    assert result.returncode == 0, result.stderr
    return out


def on_cluster(cluster: str, *flags: str) -> list[str]:
    return ["--executor", "ray", "--ray-address", cluster, *flags]


def test_a_two_node_cluster_run_stopped_and_resumed_writes_the_local_submission(
    cluster: str, sample_index: Path, local_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "preds.json"
    args = webqa_args(sample_index, out, *QUESTIONS, *on_cluster(cluster))
    interrupted = interrupt_after(args, partial_path(out), answered=2)
    assert interrupted.returncode == 130, interrupted.stderr[-3000:]
    assert "rerun with --resume" in interrupted.stderr and not out.exists()
    saved = [json.loads(line)["id"] for line in complete_lines(partial_path(out))[1:]]
    assert 2 <= len(saved) < QUESTION_COUNT
    local = json.loads(local_run.read_text())
    assert saved == list(local)[: len(saved)]  # in question order, without gaps

    resumed = run_on_loopback([*MMRAG, *args, "--resume"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"({QUESTION_COUNT - len(saved)} answered, {len(saved)} resumed" in resumed.stdout
    assert out.read_bytes() == local_run.read_bytes()
    assert not partial_path(out).exists()
    run = table_rows((tmp_path / "preds.report.md").read_text(), "Run")
    assert run["answered by"] == [
        "Ray cluster (2 nodes, 2 CPUs, 0 GPUs): 2 workers on 2 of its nodes, 2 questions in flight"
    ]


def test_cluster_refusals_are_one_line(cluster: str, sample_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "preds.json"
    address = f"127.0.0.1:{free_port()}"
    unreachable = run_mmrag(*webqa_args(sample_index, out, *on_cluster(address)))
    assert_one_line_error(unreachable, "cannot reach the Ray cluster at", address)
    too_many = run_on_loopback(
        [*MMRAG, *webqa_args(sample_index, out, *on_cluster(cluster, "--ray-workers", "5"))]
    )
    assert_one_line_error(too_many, "--ray-workers 5: the Ray cluster has 2 CPUs")
    without_ray = run_mmrag(*webqa_args(sample_index, out, "--ray-workers", "2"))
    assert_one_line_error(without_ray, "--ray-workers need --executor ray")
    assert not out.exists() and not partial_path(out).exists()


@pytest.mark.slow
def test_a_worker_node_lost_mid_run_hands_its_questions_to_the_others(
    sample_index: Path, local_run: Path, tmp_path: Path
) -> None:
    """A cluster of its own, since a node goes: the run goes on with the worker left."""
    out = tmp_path / "preds.json"
    partial = partial_path(out)
    with two_node_cluster() as (nodes, worker):
        args = webqa_args(sample_index, out, *QUESTIONS, *on_cluster(nodes.address))
        run = start_on_loopback([*MMRAG, *args])

        def answered() -> bool:
            return partial.exists() and len(complete_lines(partial)) > 2

        stdout, stderr = lose_node_when(nodes, worker, run, answered)
    assert run.returncode == 0, stderr[-3000:]
    assert f"{QUESTION_COUNT} questions ({QUESTION_COUNT} answered" in stdout
    assert out.read_bytes() == local_run.read_bytes()
    answered_by = table_rows((tmp_path / "preds.report.md").read_text(), "Run")["answered by"]
    assert "2 workers on 2 of its nodes, 1 lost during the run" in answered_by[0]


def test_a_toloka_run_on_the_cluster_boxes_what_a_local_run_boxes(
    cluster: str, tiny_owlv2: Path, tmp_path: Path
) -> None:
    """Every benchmark's run shards the same way; here each worker loads its own detector."""
    from tests.test_eval_run_toloka import fixture_rows, write_release

    data = write_release(tmp_path, fixture_rows(4))
    args = ["eval", "run", "toloka", "--data", str(data), "--images", str(tmp_path / "imgs")]
    args += ["--detector", str(tiny_owlv2)]
    local = run_mmrag(*args, "--out", str(tmp_path / "local.csv"))
    assert local.returncode == 0, local.stderr[-3000:]
    spread = run_on_loopback(
        [*MMRAG, *args, "--out", str(tmp_path / "ray.csv"), *on_cluster(cluster)]
    )
    assert spread.returncode == 0, spread.stderr[-3000:]
    assert (tmp_path / "ray.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()
    run = table_rows((tmp_path / "ray.report.md").read_text(), "Run")
    assert "2 workers on 2 of its nodes" in run["answered by"][0]
