"""QAPipeline.run: one call per question, tokens then the result, one deadline, cancellation."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from mmrag.core.components import build_pipeline
from mmrag.core.pipeline import QAPipeline
from mmrag.core.settings import Settings
from mmrag.generation.writer import AnswerWriter
from tests.helpers import running_llama_server

QUESTION = "What color is the door of the Harbor Inn?"


@pytest.fixture(scope="module")
def pipeline(hybrid_index: Path):
    return build_pipeline(Settings(index=hybrid_index))


def test_a_run_yields_tokens_then_holds_the_result(pipeline):
    with pipeline.run(QUESTION) as run:
        tokens = list(run)
    assert tokens and run.result is not None
    answer = run.result.answer
    assert answer.generation_error is None and answer.citations
    assert "".join(tokens).strip()
    timings = run.result.timings
    assert 0 < timings.first_token_s <= timings.generate_s
    assert timings.retrieve_s > 0 and timings.rerank_s >= 0


def test_restricted_candidates_are_the_only_sources(pipeline, sample_questions):
    question = next(q for q in sample_questions if q.qcate == "color")
    own = [source.id for source in (*question.pos_sources, *question.neg_sources)]
    result = pipeline.answer(question.question, candidates=own)
    assert {scored.source.id for scored in result.selection.considered} <= set(own)
    assert result.answer.citations


class PausingEngine:
    """The real engine, paused after its first token until the test lets it go on, so that
    `close()` lands mid-answer on any machine, however fast the model writes."""

    def __init__(self, engine) -> None:
        self.engine = engine
        self.info = engine.info
        self.go_on = threading.Event()

    def stream(self, messages, **options):
        for n, delta in enumerate(self.engine.stream(messages, **options)):
            if n == 1:
                self.go_on.wait(30)
            yield delta


def test_closing_a_run_mid_answer_frees_the_engine_for_the_next(pipeline):
    pausing = PausingEngine(pipeline.writer.engine)
    paused = QAPipeline(
        pipeline.retriever, pipeline.selector, AnswerWriter(pausing), pipeline.attributor
    )
    run = paused.run(QUESTION)
    assert next(iter(run))
    run.close()  # as the service does when a client goes away
    pausing.go_on.set()
    result = run.wait()
    assert result.answer.generation_error == "the request was cancelled"
    assert result.answer.sources  # the sources still come back
    engine_lock = pipeline.writer.engine.lock
    assert engine_lock.acquire(blocking=False), "the cancelled run still holds the engine"
    engine_lock.release()
    assert pipeline.answer(QUESTION).answer.generation_error is None


def test_bad_input_reaches_the_caller_as_the_error_it_is(pipeline):
    from mmrag.indexes.errors import InputError

    with pytest.raises(InputError, match="question is empty"):
        pipeline.answer("   ")
    with pytest.raises(InputError, match="not in"):
        pipeline.answer(QUESTION, candidates=["no-such-source"])


def test_an_engine_that_hangs_before_its_first_token_meets_the_deadline(
    hybrid_index: Path, smollm2_gguf: Path, tmp_path: Path
):
    """A real llama.cpp server frozen with SIGSTOP: it accepts the connection and never
    answers, as a wedged GPU server does. The engine's own HTTP timeout is a minute."""
    with running_llama_server(smollm2_gguf, tmp_path / "server.log") as (server, base_url):
        settings = Settings(
            index=hybrid_index, engine="openai", model="smollm2", engine_url=base_url
        )
        frozen = build_pipeline(settings)
        server.send_signal(signal.SIGSTOP)
        try:
            result = frozen.answer(QUESTION, timeout_s=1.0)
        finally:
            server.send_signal(signal.SIGCONT)
    # The engine's own HTTP timeout (a minute) would have ended in another error: this one is
    # the run's deadline, reached while the server was still frozen.
    assert result.answer.generation_error == "timed out after 1 s"
    assert result.answer.sources and result.answer.text == ""


def test_the_route_the_cli_and_the_eval_run_each_call_the_pipeline_once_per_question(
    pipeline, hybrid_index: Path, sample_questions, monkeypatch, capsys
):
    from fastapi.testclient import TestClient

    from mmrag.evaluation.runs.webqa import WebQARunner
    from mmrag.service.app import create_app
    from mmrag.service.cli import main

    calls: list[str] = []
    original = QAPipeline.run

    def counted(self, question, **options):
        calls.append(question)
        return original(self, question, **options)

    monkeypatch.setattr(QAPipeline, "run", counted)
    with TestClient(create_app(Settings(index=hybrid_index), pipeline)) as client:
        assert client.post("/v1/answer", json={"question": QUESTION}).status_code == 200
        streamed = client.post("/v1/answer", json={"question": QUESTION, "stream": True})
        assert streamed.status_code == 200
    assert calls == [QUESTION, QUESTION]
    assert main(["ask", QUESTION, "--index", str(hybrid_index), "--json"]) == 0
    assert calls == [QUESTION] * 3 and '"citations"' in capsys.readouterr().out
    question = next(q for q in sample_questions if q.split == "val")
    for setting in ("full", "restricted"):
        WebQARunner(pipeline, setting)(question)
    assert calls[3:] == [question.question] * 2


def test_each_stage_stops_at_the_deadline_and_the_timings_name_it(pipeline):
    """Issue 37: resolving a follow-up and checking an answer ran on past the deadline (46-54 s
    and minutes against 30 s), the answer labelled as generation's. Stopped in a stage, a run
    ends with no answer (half a check is none), the sources it has, and the stage named."""
    from mmrag.generation.types import Turn
    from mmrag.runtime.deadline import Deadline

    gone = Deadline(None)
    gone.cancel()  # as a client that leaves does
    turns = [Turn("user", "Tell me about the Harbor Inn."), Turn("assistant", "It is an inn.")]
    result = pipeline.answer("What color is its door?", conversation=turns, deadline=gone)
    assert result.timings.as_dict()["stopped_in"] == "resolve"
    assert result.answer.generation_error == "the request was cancelled"
    assert result.answer.text == "" and result.answer.sources == []

    class LeftOnceWritten(AnswerWriter):
        """The real writer, whose client leaves the moment the answer is written."""

        def write(self, *args, **options):
            written = super().write(*args, **options)
            deadline.cancel()
            return written

    deadline = Deadline(None)  # no clock: on a loaded machine, generation may take 30 s
    leaving = QAPipeline(
        pipeline.retriever,
        pipeline.selector,
        LeftOnceWritten(pipeline.writer.engine),
        pipeline.attributor,
    )
    result = leaving.answer(QUESTION, deadline=deadline)
    assert result.timings.as_dict()["stopped_in"] == "verify"
    assert result.answer.text == "" and result.answer.citations == []  # nothing unchecked
    assert result.answer.sources and result.timings.generate_s > 0
    assert "stopped_in" not in pipeline.answer(QUESTION).timings.as_dict()


def test_a_runs_slot_is_given_back_only_once_its_worker_has_stopped(pipeline):
    """The service freed an answer's slot when the answer left, while its worker went on
    checking it for 14.5 minutes: `when_stopped` tells when the work has really ended."""
    pausing = PausingEngine(pipeline.writer.engine)
    paused = QAPipeline(
        pipeline.retriever, pipeline.selector, AnswerWriter(pausing), pipeline.attributor
    )
    stopped = threading.Event()
    run = paused.run(QUESTION)
    run.when_stopped(stopped.set)
    assert next(iter(run))  # the worker is inside the engine, paused
    run.close()
    assert not stopped.is_set()  # closed, but still working
    pausing.go_on.set()
    run.wait()
    assert stopped.wait(30)
    called = []
    run.when_stopped(lambda: called.append(1))  # already stopped: at once
    assert called == [1]
