"""Does a cited source support the claim that cites it? Keep what it does, decline what none does.

A model of any size invents facts and cites a source for them (SmolLM2 answered "Who won the
1998 football world cup?" with "England [1]", citing a snippet about Lake Baikal). So after
generation every citation is checked against its source, and the answer that leaves is one of:

- `model`: the model's own citations, each verified;
- `verified`: the model cited nothing that holds, but a given source supports its sentence;
- `extractive`: no source supports the sentence; the source sentence that best answers the
  question replaces it, cited;
- `declined`: nothing given answers the question, so the answer says so, citing nothing;
- `unsupported`: as declined, where declining is turned off (benchmarks whose every question is
  answerable): the sentence is kept, citing nothing.

Support is decided by a `Verifier`: an NLI or cross-encoder model by name or path, or the
offline default, `LexicalVerifier`: what the claim adds to the question (numbers, names,
attributes) must be found in the source's text, caption or OCR text, with embedding similarity
breaking the tie when only some of it is.

A claim cited to an image may say what only its pixels show: WebQA writes its image questions
(colours, shapes, counts) so that the caption does not answer them. With a judge that sees
images (a `Judge`, the LM judge on a VLM), such a claim is supported when its text holds the
whole claim or the judge confirms it from the image, and a judge's "no" beats a partial text
match. Text sources, and every source when no judge sees images, are verified by their text.
With a text judge as well (`text_judge`, the LM judge on a capable model), a claim whose text
score lies in the `UNCERTAIN` band is put to it as a yes/no question over the cited text, and
its answer decides. What the judges are asked about one claim is asked together, within their
deadline, and a question they leave unanswered leaves the text verifier's verdict.
Each kept citation says what judged it and how surely, and a text source's the sentence that
supports the claim (`Citation.span`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple, Protocol

from mmrag.generation.citations import cite_sentence, strip_markers
from mmrag.generation.judge import Ask, Entails, Shows
from mmrag.generation.reading.question import Question, as_question
from mmrag.generation.reading.text import Reading, read
from mmrag.generation.types import Answer, Citation, Cut, JudgedBy, SourceLike
from mmrag.generation.verification.grounding import Gap
from mmrag.generation.verification.selection import (
    choose,
    gives_what_is_asked,
    picks_one,
    polarity,
    source_verdict,
    states,
)
from mmrag.generation.verification.statements import evidence_text
from mmrag.generation.verification.verifier import SUPPORTED, Verifier, support_span

DECLINE = "The indexed sources do not answer this question."
UNANSWERED = frozenset({"declined", "unsupported"})  # attributions of an answer no source backs
# auto: decline what no source supports; never: keep it, uncited (every question answerable).
AbstainPolicy = Literal["auto", "never"]
# Text scores a text judge is asked about: between them the verifier is unsure of its verdict
# (a calibrated verifier's probability near 0.5), outside them its verdict stands. The lexical
# verifier's scores are 0 or 1, so behind it a text judge is never asked.
UNCERTAIN = (0.25, 0.75)


class CitationScores(NamedTuple):
    """ALCE's citation recall (the cited sources together support the claim) and precision
    (the share of citations that are needed: each supports the claim alone, or the others do
    not without it); None where the answer cites nothing."""

    recall: float | None
    precision: float | None


class Judge(Protocol):
    """What verification asks a model (the LM judge): whether an image source shows a claim
    (`Shows`, of a judge that sees images), whether a cited text says it (`Entails`)."""

    def answer_all(
        self, asks: Sequence[Ask], *, interrupt: Callable[[], str | None] | None = None
    ) -> list[float | None]:
        """P("yes") for each, asked together within the judge's deadline; None where it
        cannot see the image, gives no verdict or gives none in time."""
        ...


class Judgement(NamedTuple):
    supported: bool
    judged_by: JudgedBy
    score: float  # the text verifier's score, or the judge's P("yes")


class Attributor:
    def __init__(
        self,
        verifier: Verifier,
        *,
        threshold: float = SUPPORTED,
        judge: Judge | None = None,
        text_judge: Judge | None = None,
    ) -> None:
        """`judge`, a model that sees images, checks claims cited to image sources against
        their pixels; `text_judge` decides the claims whose text score is `UNCERTAIN`; without
        them, every source is judged by its text."""
        self.verifier = verifier
        self.threshold = threshold
        self.judge = judge
        self.text_judge = text_judge

    def text_holds(
        self, question: Question | str, claim: str, sources: Sequence[SourceLike]
    ) -> tuple[bool, float]:
        """Whether the sources' text holds the claim as it would be shown, and its score. The
        score is a probability fitted on people's judgements, which forgive a word or a
        relation no source says; what a user is shown may not have one (a cut that left "is a
        that guarantees" scores 0.6), so the text holds a claim only when its verdict grounds
        every word and relation too, and a yes or a no only where a source gives it."""
        question = as_question(question)
        evidence = [evidence_text(s) for s in sources]
        found = self.verifier.verdict(question, claim, evidence)
        holds = not found.ungrounded and found.support >= self.threshold
        if question.kind == "yes_no":
            holds = holds and source_verdict(question, evidence) == polarity(read(claim))
        return holds, found.support

    def judgement(
        self,
        question: Question | str,
        claim: str,
        source: SourceLike,
        *,
        interrupt: Callable[[], str | None] | None = None,
    ) -> Judgement:
        """Whether one source supports the claim, and what said so. Its text settles it when
        it holds the whole claim; else, for an image, a judge that sees it decides (its "no"
        beating a partial text match); else, where the text score is `UNCERTAIN`, the text
        judge decides; else, or where a judge gives no verdict, the text verifier's stands."""
        return self.judgements(question, claim, [source], interrupt=interrupt)[0]

    def judgements(
        self,
        question: Question | str,
        claim: str,
        sources: Sequence[SourceLike],
        *,
        interrupt: Callable[[], str | None] | None = None,
    ) -> list[Judgement]:
        """Each source judged alone, as `judgement` says; what a judge is asked about them is
        asked at once (one batch, for an engine that batches), until `interrupt()` says stop."""
        question = as_question(question)
        judged, asks = [], []
        for at, source in enumerate(sources):
            holds, text = self.text_holds(question, claim, [source])
            judged.append(Judgement(holds, "text", text))
            unsettled = text < self.verifier.certain
            if source.modality == "image" and self.judge is not None and unsettled:
                asks.append((at, self.judge, Shows(question.text, claim, source), "image"))
            elif self.text_judge is not None and UNCERTAIN[0] <= text <= UNCERTAIN[1]:
                cited = Entails(question.text, claim, evidence_text(source))
                asks.append((at, self.text_judge, cited, "model"))
        for judge in {id(judge): judge for _, judge, _, _ in asks}.values():
            mine = [(at, ask, by) for at, asker, ask, by in asks if asker is judge]
            said = judge.answer_all([ask for _, ask, _ in mine], interrupt=interrupt)
            for (at, _, by), yes in zip(mine, said, strict=True):
                if yes is not None:
                    judged[at] = Judgement(yes >= SUPPORTED, by, yes)
        return judged

    def supports(self, question: Question | str, claim: str, sources: Sequence[SourceLike]) -> bool:
        """One source as `judgement` judges it; several read together, as text."""
        question = as_question(question)
        if len(sources) == 1:
            return self.judgement(question, claim, sources[0]).supported
        return self.text_holds(question, claim, sources)[0]

    def attribute(
        self,
        question: Question | str,
        answer: Answer,
        *,
        abstain: bool = True,
        runners_up: Sequence[SourceLike] = (),
        interrupt: Callable[[], str | None] | None = None,
    ) -> Answer:
        """The answer with only supported citations, or cut, replaced or declined as the
        module docstring says; a failed generation is returned as it is. `runners_up`,
        retrieved sources that were not given to the model, may still hold the sentence that
        answers (then cited as one more source). `interrupt()` (the request's deadline) stops
        waiting for judges, whose unanswered questions leave the text verifier's verdicts."""
        question = as_question(question)
        if answer.generation_error:  # an empty answer (the prompt's labels alone) goes on
            return answer
        sources = list(answer.sources)
        said = answer.text_without_markers
        found = self.verifier.verdict(question, said, [evidence_text(s) for s in sources])
        gaps = list(found.ungrounded)
        # What the user sees stays strict: a part is shown only without the words no source
        # says, and a claim the sources contradict is not shown in any part, unless what
        # contradicts it is a word that can be cut (a relation, a superlative beyond its scope).
        cuttable = {gap.reason for gap in gaps}
        refused = [reason for reason in found.contradictions if reason not in cuttable]
        parts = [] if refused else supported_parts(question, said, gaps)
        # A judge that sees a cited photo may find there what no text says ("the door is red").
        pictured = self.judge is not None and any(
            sources[c.marker - 1].modality == "image" for c in answer.citations
        )
        for part in (p for p in parts if pictured or not _keeps_gap(p.text, gaps)):
            claim = part.text
            judged: dict[int, Judgement] = {}  # by marker: a judge is asked once per claim
            markers = [c.marker for c in answer.citations]
            kept = self._supporting(question, claim, sources, markers, judged, interrupt)
            if kept:
                cited = [_judged(sources, n, judged[n]) for n in kept]
                return self._cited(answer, claim, cited, "model", part.cut)
            if len(markers) > 1:  # a comparison needs both of its sources
                joint = self._joint(question, claim, sources, markers)
                if joint is not None:
                    return self._cited(answer, claim, joint, "model", part.cut)
            everything = range(1, len(sources) + 1)
            backing = self._supporting(question, claim, sources, everything, judged, interrupt)
            if backing:
                citations = [_judged(sources, n, judged[n]) for n in backing[:2]]
                return self._cited(answer, claim, citations, "verified", part.cut)
            if len(sources) > 1:
                joint = self._joint(question, claim, sources, everything)
                if joint is not None:
                    return self._cited(answer, claim, joint[:2], "verified", part.cut)
        reason = "; ".join(found.contradictions) or _unsupported(gaps)
        replaced = [Cut(said, reason)] if said else []
        pool = [*sources, *(s for s in runners_up if s.id not in {g.id for g in sources})]
        chosen = choose(question, pool, given=len(sources))
        if chosen is not None:
            sentence, number = chosen.said, chosen.statement.number
            if number > len(sources):  # a runner-up answers: it joins the answer's sources
                sources.append(pool[number - 1])
                answer, number = replace(answer, sources=sources), len(sources)
            citation = _judged(sources, number, None)
            return self._cited(answer, sentence, [citation], "extractive", replaced)
        return replace(self.unanswered(answer, abstain=abstain), cut=replaced if abstain else [])

    def _supporting(
        self,
        question: Question,
        claim: str,
        sources: Sequence[SourceLike],
        markers: Iterable[int],
        judged: dict[int, Judgement],
        interrupt: Callable[[], str | None] | None,
    ) -> list[int]:
        """The markers whose source supports the claim alone; those not yet in `judged` (this
        claim's judgements, by marker) are judged together and added."""
        markers = list(markers)
        new = [n for n in dict.fromkeys(markers) if n not in judged]
        found = self.judgements(question, claim, [sources[n - 1] for n in new], interrupt=interrupt)
        judged.update(zip(new, found, strict=True))
        return [n for n in markers if judged[n].supported]

    def _joint(
        self, question: Question, claim: str, sources: Sequence[SourceLike], markers: Sequence[int]
    ) -> list[Citation] | None:
        """Citations of sources that support the claim only read together, as text."""
        holds, score = self.text_holds(question, claim, [sources[n - 1] for n in markers])
        if not holds:
            return None
        return [_judged(sources, n, Judgement(True, "text", score)) for n in markers]

    def unanswered(self, answer: Answer, *, abstain: bool) -> Answer:
        """An answer no source supports: declined, or kept without citations."""
        if abstain:
            return replace(
                answer,
                text=DECLINE,
                text_without_markers=DECLINE,
                citations=[],
                abstained=True,
                attribution="declined",
            )
        return self._cited(answer, answer.text_without_markers, [], "unsupported")

    @staticmethod
    def _cited(
        answer: Answer,
        claim: str,
        citations: list[Citation],
        how: str = "model",
        cut: Sequence[Cut] = (),
    ) -> Answer:
        """The claim, cited; each cited text source with the sentence that supports it; `cut`,
        what was left out of the model's sentence."""
        text = cite_sentence(claim, [c.marker for c in citations])
        spans = [
            replace(c, span=support_span(claim, answer.sources[c.marker - 1].text))
            if c.modality == "text"
            else c
            for c in citations
        ]
        return replace(
            answer,
            text=text,
            text_without_markers=strip_markers(text),
            citations=spans,
            attribution=how,
            cut=list(cut),
        )

    def cite_instead(self, question: Question | str, answer: Answer, marker: int) -> Answer:
        """The answer cited to source [marker] alone where that supports its claim alone (the
        user's own photo, rather than another place's sign that says the same); else as it
        was."""
        if not answer.citations or [c.marker for c in answer.citations] == [marker]:
            return answer
        claim = answer.text_without_markers
        judged = self.judgement(question, claim, answer.sources[marker - 1])
        if not judged.supported:
            return answer
        citation = _judged(answer.sources, marker, judged)
        return self._cited(answer, claim, [citation], answer.attribution, answer.cut)

    def citation_scores(
        self, question: Question | str, claim: str, cited: Sequence[SourceLike]
    ) -> CitationScores:
        question = as_question(question)
        if not cited:
            return CitationScores(None, None)
        if not self.supports(question, claim, cited):
            return CitationScores(0.0, 0.0)
        needed = sum(
            self.supports(question, claim, [source])
            or not self.supports(question, claim, [s for s in cited if s is not source])
            for source in cited
        )
        return CitationScores(1.0, needed / len(cited))


@dataclass(frozen=True)
class Part:
    """A version of the model's sentence, and what was cut from it to make it."""

    text: str
    cut: tuple[Cut, ...] = ()


# Where a modifier or clause hangs that can go without breaking the sentence: "a local
# brewer" (appos), "which is the largest …" (relcl), "making it …" (advcl), "and largest"
# (conj), "in the city" (prep), "classic" (amod).
_DETACHABLE = frozenset(
    {"amod", "advmod", "appos", "relcl", "acl", "advcl", "conj", "prep", "npadvmod", "compound"}
)
REPEAT_WORDS = 3  # "by Jory Treloar, a local brewer, in 1888" said twice in a row


def supported_parts(question: Question | str, claim: str, gaps: Sequence[Gap] = ()) -> list[Part]:
    """The claim, then shorter versions, longest first: said once where the model repeated
    itself, without the modifiers and clauses that hold words no source says (`gaps`), and cut
    at clause boundaries. Each is kept if it is a full sentence (a finite verb) that answers:
    states the question's `relation` (a word of it at least: "France won the 1998 World Cup"
    answers the "football world cup" question), gives what the question asks for and says
    something beyond the question. Small models tack invented clauses and praise onto a right
    answer ("... first held in 1981 in Trevellow, a town in the UK", "a classic example of"),
    and what remains without them is worth keeping."""
    question = as_question(question)
    asked, wanted = question.terms.words, question.relation

    def answers(part: str) -> bool:
        stated = not wanted or bool(wanted & states(read(part)))
        # It says what it is about: "The answer is: 221." names nothing the question asked of.
        about = not asked or bool(asked & read(part).terms.words)
        full = read(part).finite() and _complete(part, whole.text)
        return stated and about and full and gives_what_is_asked(question, part)

    whole = _said_once(claim)
    versions = [whole, *_without_gaps(whole, gaps)] if gaps else [whole]
    body = whole.text.rstrip(".!? ")
    cuts = [m.start() for m in re.finditer(r",\s|;| - | (?:while|and|but|which|who) ", body)]
    for cut in reversed(cuts):
        rest = body[cut:].strip(" ,;-")
        held = [gap.reason for gap in gaps if gap.text in rest]
        reason = "; ".join(held) or "its source does not support it"
        versions.append(Part(body[:cut].rstrip(" ,;") + ".", (*whole.cut, Cut(rest, reason))))
    kept = [whole] * answers(whole.text)
    # A cut keeps what the sentence was about, the question's words it says: "The number
    # Wetherley is 12" is no answer about the town hall in Wetherley that the model named.
    about = asked & read(whole.text).terms.words
    kept += [
        v
        for v in versions[1:]
        if (read(v.text).terms.words - asked or picks_one(question, v.text))
        and about <= read(v.text).terms.words
        and answers(v.text)
    ]
    return list({part.text: part for part in kept}.values())


# What completes "is": "is a hotel" (attr), "is green" (acomp), "is in Wetherley" (prep).
_COMPLEMENTS = frozenset({"attr", "acomp", "prep", "advmod", "npadvmod", "oprd", "ccomp", "dobj"})


def _complete(part: str, whole: str) -> bool:
    """Whether a cut keeps what each verb says: "is" what the thing is ("The coat of arms …
    is a." is no sentence), and a verb that had an object or a complement in the model's
    sentence still has one ("…, and was known." was "known for its fish pie")."""
    reading, before = read(part), read(whole)
    roots = [w for w in reading.words if w.dep == "ROOT" and w.lemma == "be"]
    if not all(any(c.dep in _COMPLEMENTS for c in reading.children(r.i)) for r in roots):
        return False
    completed = {}  # each verb, by its lemma and its place among verbs of that lemma
    for found in (before, reading):
        seen: dict[str, int] = {}
        for verb in (w for w in found.words if w.pos in ("VERB", "AUX")):
            place = (verb.lemma, seen.setdefault(verb.lemma, 0))
            seen[verb.lemma] += 1
            has = any(c.dep in _COMPLEMENTS for c in found.children(verb.i))
            if found is before:
                completed[place] = has
            elif completed.get(place) and not has:
                return False
    return True


def _said_once(claim: str) -> Part:
    """The claim with a run of words it repeats said once: at once ("by Jory Treloar, a local
    brewer, in 1888 by Jory Treloar, a local brewer, in 1888"), or again at the end of a clause
    ("built by a local stonemason, Elspeth Varley, in 1891 by a local stonemason"), with the
    words that only joined it ("…in 1988, and it was listed as a protected building in 1988").
    A run said again mid-clause compares ("the park in Wetherley is larger than the park in
    Trevellow") and stays."""
    reading = read(claim)
    words = [w for w in reading.words if w.text[0].isalnum()]
    lowers = [w.text.lower() for w in words]
    for size in range(len(lowers) // 2, REPEAT_WORDS - 1, -1):
        for first in range(len(lowers) - 2 * size + 1):
            run = lowers[first : first + size]
            if not any(w.content for w in words[first : first + size]):
                continue
            for again in range(first + size, len(lowers) - size + 1):
                if lowers[again : again + size] != run:
                    continue
                end = words[again + size - 1].end
                if again > first + size and claim[end:].strip()[:1] not in ("", ",", ";", "."):
                    continue  # said again mid-clause
                joined = again
                while joined > first + size and not words[joined - 1].content:
                    joined -= 1  # ", and it": words that only joined the repeat
                # Said at once: from where the first ends; else from the joining words.
                start = words[joined - 1].end if joined == first + size else words[joined].start
                if again > first + size and not _detachable(reading, start, end):
                    continue  # "on a black hanging sign of the Black Bellows Forge" keeps its sign
                text = _tidy(claim[:start] + claim[end:])
                return Part(text, (Cut(claim[start:end].strip(" ,;"), "said twice"),))
    return Part(claim)


def _detachable(reading: Reading, start: int, end: int) -> bool:
    """Whether the words in [start, end) are whole phrases that can go: each hangs, through
    the words of the span, from a modifier or clause whose subtree the span holds."""
    inside = {w.i for w in reading.words if start <= w.start and w.end <= end}
    for at in inside:
        top = at
        while reading.words[top].head != top and reading.words[top].head in inside:
            top = reading.words[top].head
        word = reading.words[top]
        if word.dep not in _DETACHABLE | {"cc", "punct", "agent"}:  # "agent": by a doer
            return False
        if not {w.i for w in reading.subtree(top) if w.pos != "PUNCT"} <= inside:
            return False
    return bool(inside)


def _without_gaps(whole: Part, gaps: Sequence[Gap]) -> list[Part]:
    """The claim without each piece that holds a gap (the smallest detachable phrase around
    it), and without all of them."""
    reading = read(whole.text)
    pieces: dict[tuple[int, int], list[str]] = {}
    for gap in gaps:
        at = next((w.i for w in reading.words if w.start == gap.start), None)
        if at is None:
            continue
        for node in [at, *reading.ancestors(at)]:
            word = reading.words[node]
            if word.dep in _DETACHABLE and word.head != word.i:
                below = reading.subtree(node)
                span = (below[0].start, below[-1].end)
                if word.dep == "conj":  # "deepest and largest": the "and" goes too
                    joins = [c for c in reading.children(word.head) if c.dep == "cc"]
                    span = (min([span[0], *(c.start for c in joins)]), span[1])
                span = _with_commas(whole.text, span)
                pieces.setdefault(span, []).append(gap.reason)
                break
    found = []
    for span, reasons in pieces.items():
        cut = Cut(whole.text[span[0] : span[1]].strip(" ,"), "; ".join(dict.fromkeys(reasons)))
        found.append((span, cut))
    versions = [Part(_tidy(_removed(whole.text, [span])), (*whole.cut, cut)) for span, cut in found]
    if len(found) > 1:
        spans = [span for span, _ in found]
        versions.append(
            Part(_tidy(_removed(whole.text, spans)), (*whole.cut, *(c for _, c in found)))
        )
    return sorted(versions, key=lambda part: -len(part.text))


def _with_commas(text: str, span: tuple[int, int]) -> tuple[int, int]:
    """A piece set off by commas, with them: "The Kittiwake, a majestic seabird, is …" leaves
    "The Kittiwake is …", not "The Kittiwake, is …"."""
    start, end = span
    before = text[:start].rstrip()
    if not before.endswith(","):
        return span
    after = text[end:].lstrip()
    start = len(before) - 1
    return (start, len(text) - len(after) + 1) if after.startswith(",") else (start, end)


def _removed(text: str, spans: Sequence[tuple[int, int]]) -> str:
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + text[end:]
    return text


def _tidy(text: str) -> str:
    """Spaces and commas as they stand once words are taken out."""
    text = re.sub(r"\s+([,.;:!?])", r"\1", " ".join(text.split()))
    text = re.sub(r",(\s*[,.;:!?])", r"\1", text)
    text = re.sub(r"\s+\b(?:a|an|the)\s*(?=[,.;:!?]|$)", "", text)
    return text.strip(" ,")


def _keeps_gap(part: str, gaps: Sequence[Gap]) -> bool:
    """Whether a version of the claim still holds a word no source says."""
    words = {word.text for word in read(part).words}
    return any(gap.text in words for gap in gaps)


def _unsupported(gaps: Sequence[Gap]) -> str:
    """Why the model's sentence was not kept."""
    if not gaps:
        return "no given source supports it as an answer"
    said = ", ".join(dict.fromkeys(f"'{gap.text}'" for gap in gaps))
    return f"no given source says {said}"


def _judged(sources: Sequence[SourceLike], marker: int, judged: Judgement | None) -> Citation:
    """The citation of source [marker]; an extracted sentence is the source's own text."""
    source = sources[marker - 1]
    return Citation(
        marker=marker,
        source_id=source.id,
        modality=source.modality,
        judged_by="text" if judged is None else judged.judged_by,
        support=None if judged is None else judged.score,
    )


def invented_terms(
    question: Question | str, claim: str, sources: Sequence[SourceLike]
) -> frozenset[str]:
    """Numbers and names the claim states that neither the question nor any given source
    holds: facts the model made up."""
    question = as_question(question)
    known = question.terms.words | read(" ".join(evidence_text(s) for s in sources)).terms.words
    return read(claim).terms.key - known
