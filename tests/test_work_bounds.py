"""The text layer's work is bounded by size and stops at the request's deadline (issue 37).

An attack on the service found that reading and grounding had no bounds of their own: a chat of
63 distinct 8,000-character turns took 46-54 s to resolve against a 30 s deadline and left
145 MB in the reading cache per request; a claim checked against a source repeating "It faces
north." ran for minutes, its search over budget counted as *grounded*; a source of 1,000,000
characters was a 500 (spaCy's E088). Each bound is asserted here with inputs of a few KB: the
limits are lowered where the real ones take megabytes to reach.
"""

from __future__ import annotations

import pytest

from mmrag.core.conversation import MAX_RESOLVE_CHARS, RuleResolver
from mmrag.generation.reading import text as reading
from mmrag.generation.types import Turn
from mmrag.generation.verification import grounding
from mmrag.runtime.deadline import Deadline, Stopped, check, stage, working


def distinct_text(number: int, chars: int) -> str:
    """A text of about `chars` characters that no other number gives (the cache cannot help)."""
    words = " ".join(f"stone{number}x{at} wall" for at in range(chars // 18))
    return f"The Harbor Inn number {number} has a {words}."


class CountingPipeline:
    """spaCy's pipeline, counting the characters it is given to parse."""

    def __init__(self, nlp) -> None:
        self.nlp, self.chars = nlp, 0

    def __call__(self, text: str):
        self.chars += len(text)
        return self.nlp(text)

    def pipe(self, texts):
        texts = list(texts)
        self.chars += sum(map(len, texts))
        return self.nlp.pipe(texts)


@pytest.fixture
def parsed(monkeypatch) -> CountingPipeline:
    counting = CountingPipeline(reading._pipeline())
    monkeypatch.setattr(reading, "_pipeline", lambda: counting)
    return counting


def test_a_follow_up_is_resolved_from_the_latest_turns_within_a_character_budget(parsed):
    """60 KB of distinct turns (the attack sent 0.5 MB): only the latest are read, and the
    topic they carry still resolves the follow-up."""
    turns = []
    for number in range(30):
        turns += [Turn("user", distinct_text(number, 2000)), Turn("assistant", "It is [1].")]
    turns += [Turn("user", "What colour is the door of the Harbor Inn?"), Turn("assistant", "Red.")]
    conversation = sum(len(turn.content) for turn in turns)
    assert conversation > 8 * MAX_RESOLVE_CHARS
    resolved = RuleResolver().resolve(turns, "When was it built?")
    assert resolved == "When was the Harbor Inn built?"
    assert parsed.chars < 4 * MAX_RESOLVE_CHARS < conversation


def test_the_resolver_stops_at_the_deadline_between_turns(parsed):
    turns = [Turn("user", distinct_text(number, 200)) for number in range(10)]
    gone = Deadline(None)
    gone.cancel()  # a client that left, or a deadline passed: the same stop
    with working(gone), stage("resolve"), pytest.raises(Stopped) as stopped:
        RuleResolver().resolve(turns, "When was it built?")
    assert stopped.value.stage == "resolve"
    assert stopped.value.reason == "the request was cancelled"
    assert parsed.chars == 0


def test_the_reading_cache_is_bounded_in_bytes_not_texts(monkeypatch):
    """Counted in texts (8,192), the cache held gigabytes of long turns."""
    monkeypatch.setattr(reading, "CACHE_BYTES", 2_000_000)
    monkeypatch.setattr(reading, "MAX_CACHED_BYTES", 500_000)
    texts = [distinct_text(1000 + number, 3000) for number in range(20)]  # 60 KB of text
    for text in texts:
        reading.read(text)
        assert reading.cached_bytes() <= reading.CACHE_BYTES
    assert texts[-1] in reading._CACHE and texts[0] not in reading._CACHE  # oldest out first
    huge = distinct_text(2000, 20_000)  # a reading of over 500 KB is read, not kept
    assert reading.read(huge).words and huge not in reading._CACHE


def test_a_text_past_spacys_length_limit_is_read_in_windows(monkeypatch):
    """spaCy refuses a text of its `max_length` (1,000,000 characters: a 500 on every question
    that retrieved such a source); a long text is read in windows cut at sentence ends, and
    reads as it does whole."""
    text = " ".join(
        f"The bridge number {n} over the River Alder was built in 18{n:02d} by Thomas Telford."
        for n in range(80)
    )
    whole = reading._reading(reading._pipeline()(text), text)
    monkeypatch.setattr(reading._pipeline(), "max_length", 2_000)
    monkeypatch.setattr(reading, "WINDOW_CHARS", 1_500)
    assert len(text) > 3 * 2_000
    windowed = reading.read(text)
    assert windowed.words == whole.words and windowed.sentences == whole.sentences
    assert windowed.phrases == whole.phrases and windowed.entities == whole.entities
    gone = Deadline(None)
    gone.cancel()
    with working(gone), pytest.raises(Stopped):  # checked between windows
        reading.read(text + " The end.")


REPEATED = "The door is red. The boat is blue. It faces north. "


def alignment_work(monkeypatch, repeats: int) -> tuple[int, list[grounding.Gap]]:
    """The word-to-word comparisons (`_between`) one claim's check makes against a source of
    `repeats` copies of three sentences, and its gaps."""
    calls = []
    between = grounding._between
    monkeypatch.setattr(grounding, "_between", lambda *args: calls.append(1) or between(*args))
    gaps = grounding.Grounder().gaps("The red boat faces north.", [REPEATED * repeats])
    return len(calls), gaps


def test_aligning_a_claim_with_a_repetitive_source_is_linear_in_its_words(monkeypatch):
    """The alignment compared every option of a word with every option of its neighbour (and
    rebuilt a set per comparison): 4 x N^2 comparisons for N repetitions (5,608 words: 56 s).
    Options indexed by sentence, a word is compared only where its neighbour could be."""
    small, gaps = alignment_work(monkeypatch, 40)  # 2 KB
    assert [gap.text for gap in gaps] == ["boat"]  # "red boat" is said nowhere
    words = len(reading.read(REPEATED * 40).words)
    larger, _ = alignment_work(monkeypatch, 80)
    assert small <= words and larger <= 2 * small + 2


def test_an_alignment_over_budget_is_not_grounded(monkeypatch):
    """Past its budget, the search took the claim's relations as said: an unsupported claim
    over a repetitive source failed open."""
    repeated = "The gate of the park faces the street. The shop faces the harbour. " * 20
    claim = "The gate faces the harbour."
    said = f"Kell Park. {repeated}{claim}"  # the relation, in its last sentence only
    assert grounding.Grounder().gaps(claim, [said]) == []
    monkeypatch.setattr(grounding, "MAX_ALIGNMENTS", 10)
    gaps = grounding.Grounder().gaps(claim, [said])
    assert [gap.reason for gap in gaps] == [grounding.OVER_BUDGET]


def test_checking_a_claim_stops_at_the_deadline():
    gone = Deadline(None)
    gone.cancel()
    with working(gone), stage("verify"), pytest.raises(Stopped) as stopped:
        grounding.Grounder().gaps("The boat faces north.", [REPEATED * 4])
    assert stopped.value.stage == "verify"


def test_check_does_nothing_without_a_deadline_and_names_the_stage_with_one():
    check()  # a bench, a test, a command without a deadline
    with working(Deadline(None)), stage("retrieve"):
        check()
    late = Deadline(0.0)
    with working(late), stage("ground"), pytest.raises(Stopped, match=r"timed out after 0 s"):
        while True:  # the clock moves on from the deadline's start
            check()
