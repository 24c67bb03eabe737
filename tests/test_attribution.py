"""Citations checked against their sources: kept, replaced, or the answer declined.

The cases are the ones a user met: an invented winner of the 1998 world cup cited to a snippet
about Lake Baikal, a lighthouse "5,895" metres tall (Kilimanjaro's height, from another
snippet) cited to a photo whose caption gives no height.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mmrag.generation.citations import CitationFormat, cite
from mmrag.generation.errors import GenerationError
from mmrag.generation.reading.question import read_question
from mmrag.generation.reading.text import terms
from mmrag.generation.verification.attribution import (
    DECLINE,
    invented_terms,
    supported_parts,
)
from mmrag.generation.verification.selection import choose, verdict
from mmrag.generation.verification.verifier import (
    SUPPORTED,
    LexicalVerifier,
    NLIVerifier,
    load_verifier,
)
from tests.helpers import Src, answered
from tests.tiny_models import tiny_cross_encoder

BAIKAL = Src("s-baikal", "text", "Lake Baikal", "Lake Baikal in Siberia is 1,642 metres deep.")
KILIMANJARO = Src("s-kili", "text", "Kilimanjaro", "Kilimanjaro rises 5,895 metres in Tanzania.")
LIGHTHOUSE = Src("i-verin", "image", "Cape Verin lighthouse", "The lighthouse of Cape Verin.")
DOOR = Src("i-door", "image", "Harbor Inn door", "A wooden door painted blue at the Harbor Inn.")
SIGN = Src("i-sign", "image", "Shop sign", "A sign over a shop door.", ocr_text="OPEN 9 TO 5")
MILL = Src("s-mill", "text", "Mill Bridge", "The Mill Bridge has 4 arches.")
KELL = Src("s-kell", "text", "Kell Bridge", "The Kell Bridge has 3 arches.")
NIGHT = Src(
    "s-night", "text", "Lantern Night", "The Greywick Lantern Night was first held in 1981."
)


def test_an_invented_winner_cited_to_an_unrelated_snippet_is_declined(attributor):
    question = "Who won the 1998 football world cup?"
    answer = answered("The 1998 Football World Cup was won by England [1].", [BAIKAL])
    checked = attributor.attribute(question, answer)
    assert checked.abstained and checked.attribution == "declined"
    assert checked.text == DECLINE and checked.citations == []
    assert checked.sources == [BAIKAL]  # the nearest sources, listed as related


def test_a_height_borrowed_from_another_snippet_is_not_cited_to_the_photo(attributor):
    question = "How tall is the lighthouse of Cape Verin in metres?"
    answer = answered(
        "The lighthouse of Cape Verin is 5,895 metres tall [1].", [LIGHTHOUSE, KILIMANJARO]
    )
    checked = attributor.attribute(question, answer)
    assert checked.attribution == "declined" and checked.citations == []
    kept = attributor.attribute(question, answer, abstain=False)
    assert kept.attribution == "unsupported" and kept.citations == []
    assert "[" not in kept.text and kept.text.startswith("The lighthouse of Cape Verin is 5,895")


def test_a_supported_citation_is_kept_and_an_unsupported_one_dropped(attributor):
    question = "What color is the door of the Harbor Inn?"
    checked = attributor.attribute(
        question, answered("The door of the Harbor Inn is blue [1][2].", [DOOR, BAIKAL])
    )
    assert checked.attribution == "model"
    assert [c.source_id for c in checked.citations] == ["i-door"]
    assert checked.text == "The door of the Harbor Inn is blue [1]."


def test_a_claim_cited_to_the_wrong_source_is_cited_to_the_one_that_supports_it(attributor):
    question = "What color is the door of the Harbor Inn?"
    checked = attributor.attribute(
        question, answered("The door of the Harbor Inn is blue [1].", [BAIKAL, DOOR])
    )
    assert checked.attribution == "verified"
    assert [(c.marker, c.source_id) for c in checked.citations] == [(2, "i-door")]


def test_text_read_in_an_image_supports_a_citation(attributor):
    question = "When does the shop open?"
    checked = attributor.attribute(question, answered("The shop opens at 9 [1].", [SIGN]))
    assert checked.attribution == "model" and checked.citations[0].source_id == "i-sign"


def test_an_unsupported_sentence_gives_way_to_the_source_sentence_that_answers(attributor):
    question = "How many arches does the Mill Bridge have?"
    checked = attributor.attribute(question, answered("The Mill Bridge has 7 arches [1].", [MILL]))
    assert checked.attribution == "extractive"
    assert checked.text == "The Mill Bridge has 4 arches [1]."


def test_a_comparison_is_supported_by_its_two_sources_together(attributor):
    question = "Which has more arches, the Kell Bridge or the Mill Bridge?"
    checked = attributor.attribute(
        question,
        answered("The Mill Bridge has more arches than the Kell Bridge [1].", [MILL, KELL]),
    )
    assert checked.attribution in ("model", "verified")
    assert {c.source_id for c in checked.citations} == {"s-mill", "s-kell"}


def test_an_invented_clause_is_cut_and_the_supported_part_kept(attributor):
    question = "When was the Greywick Lantern Night first held?"
    raw = "The Greywick Lantern Night was first held in 1981 in Greywick, a town in the UK [1]."
    checked = attributor.attribute(question, answered(raw, [NIGHT]))
    assert checked.attribution == "model"
    assert checked.text == "The Greywick Lantern Night was first held in 1981 in Greywick [1]."
    assert supported_parts(question, raw.replace(" [1]", ""))[0].text.endswith("in the UK.")


def answers_the_question(question: str, sentence: str) -> bool:
    """Whether the sentence, a source's only one, is chosen as the answer."""
    return choose(read_question(question), [Src("s-1", "text", "", sentence)]) is not None


def test_a_sentence_about_the_right_thing_is_no_answer_to_another_question():
    assert not answers_the_question(
        "When did the Moonlight Cafe close?", "The Moonlight Cafe opened in 1983."
    )
    assert not answers_the_question(
        "Who painted the door of the Harbor Inn?", "A wooden door painted blue at the Harbor Inn."
    )
    # A title naming the thing asked about is not the person who made it.
    assert not answers_the_question(
        "Who painted the door of the Harbor Inn?", "Blue Door of the Harbor Inn."
    )
    assert answers_the_question(
        "Who designed the Kestrel Point Lighthouse?",
        "The Kestrel Point Lighthouse was designed by the architect Hester Sutter.",
    )


def test_what_was_asked_must_be_said_though_it_may_be_said_in_other_words(attributor):
    bakery = Src(
        "s-bakery", "text", "Lantern Bakery", "The Lantern Bakery was opened by Mara Quell."
    )
    inn = Src(
        "s-inn", "text", "Copper Kettle Inn", "The Copper Kettle Inn was built by Tom Mallory."
    )
    founded = attributor.attribute(
        "Who founded the Lantern Bakery?",
        answered("The Lantern Bakery was founded by Mara Quell [1].", [bakery]),
    )
    assert (founded.attribution, founded.text) == (
        "model", "The Lantern Bakery was founded by Mara Quell [1]."
    )  # fmt: skip
    # The builder is a person, but not the owner: no synonym makes "built" say "owns".
    owner = attributor.attribute(
        "Who owns the Copper Kettle Inn?",
        answered("Tom Mallory owns the Copper Kettle Inn [1].", [inn]),
    )
    assert owner.abstained and not owner.citations
    assert answers_the_question("Who founded the Lantern Bakery?", bakery.text)
    assert not answers_the_question("Who owns the Copper Kettle Inn?", inn.text)


def test_wrong_numbers_and_names_are_unsupported_however_similar_the_sentences(minilm):
    verifier = LexicalVerifier(minilm.encode_texts)
    evidence = [MILL.text]
    question = "How many arches does the Mill Bridge have?"
    # Scores are fitted probabilities: the right claim is settled by its text (`certain`), a
    # wrong number is far below the point from which a source supports a claim; a name no
    # source gives is below it (people's labels forgive names more than numbers: the fit's
    # weights, docs/BENCHMARKS.md).
    right = verifier.support(question, "The Mill Bridge has 4 arches.", evidence)
    assert right >= verifier.certain
    assert verifier.support(question, "The Mill Bridge has 5 arches.", evidence) < SUPPORTED / 2
    assert verifier.support(question, "The Kell Bridge has 4 arches.", evidence) < SUPPORTED
    # A yes/no answer adds nothing to the question: evidence covering the question supports it.
    yes = verifier.support("Does the Mill Bridge have 4 arches?", "Yes, it has.", evidence)
    assert yes >= SUPPORTED


def test_citation_recall_and_precision_follow_alce(attributor):
    question = "How many arches does the Mill Bridge have?"
    claim = "The Mill Bridge has 4 arches."
    assert attributor.citation_scores(question, claim, [MILL]) == (1.0, 1.0)
    assert attributor.citation_scores(question, claim, [MILL, BAIKAL]) == (1.0, 0.5)
    assert attributor.citation_scores(question, claim, [BAIKAL]) == (0.0, 0.0)
    assert attributor.citation_scores(question, claim, []) == (None, None)
    both = "The Mill Bridge has more arches than the Kell Bridge."
    together = attributor.citation_scores("Which has more arches?", both, [MILL, KELL])
    assert together == (1.0, 1.0)  # neither alone supports it, and each is needed


def test_invented_terms_are_numbers_and_names_no_source_holds():
    question = "How tall is the lighthouse of Cape Verin?"
    claim = "The lighthouse of Cape Verin is 5,895 metres tall, built by Ada Lovelace."
    assert invented_terms(question, claim, [LIGHTHOUSE]) == {"5895", "ada", "lovelac"}
    assert invented_terms(question, claim, [LIGHTHOUSE, KILIMANJARO]) == {"ada", "lovelac"}


def test_the_citation_format_constrains_to_one_cited_sentence():
    form = CitationFormat(3)
    for good in ("The door is blue [1].", "The door is blue. [1][3].", "Yes, it has 4 arches [2]."):
        assert re.fullmatch(form.regex(), good), good
    bad_ones = (
        "The door is blue.",
        "The door is blue [4].",
        "Blue. Red [1].",
        "Blue [1]",
        "The [1].",
    )
    for bad in bad_ones:
        assert not re.fullmatch(form.regex(), bad), bad
    from llama_cpp import LlamaGrammar

    LlamaGrammar.from_string(form.gbnf(), verbose=False)  # llama.cpp parses it
    assert (
        cite("The door is blue. [1][3].", [DOOR, BAIKAL, MILL]).text == "The door is blue [1][3]."
    )


def test_an_nli_verifier_loads_by_path_and_scores_entailment(tmp_path: Path):
    labels = ("contradiction", "neutral", "entailment")
    verifier = load_verifier(f"nli:{tiny_cross_encoder(tmp_path / 'nli', labels=labels)}")
    assert isinstance(verifier, NLIVerifier) and verifier.entailment == 2
    score = verifier.support("q", "the mill bridge has four arches.", [MILL.text.lower()])
    assert 0.0 < score < 1.0
    no_entailment = tiny_cross_encoder(tmp_path / "sentiment", labels=("negative", "positive"))
    with pytest.raises(GenerationError, match="no entailment label"):
        NLIVerifier(str(no_entailment))
    with pytest.raises(GenerationError, match="unknown verifier 'magic'"):
        load_verifier("magic")


ANCHOR = Src(
    "i-anchor",
    "image",
    "Upper floor of the Anchor Hotel",
    "The upper floor of the Anchor Hotel in Kestrel Bay, with six sash windows under the roof.",
)


def test_numbers_written_as_words_count_as_numbers(attributor):
    question = "How many windows are on the upper floor of the Anchor Hotel?"
    right = attributor.attribute(
        question, answered("The Anchor Hotel has six windows [1].", [ANCHOR])
    )
    assert right.attribution == "model"
    assert attributor.attribute(
        question, answered("The Anchor Hotel has 6 windows upstairs [1].", [ANCHOR])
    ).citations
    wrong = attributor.attribute(
        question, answered("The Anchor Hotel has 16 windows [1].", [ANCHOR])
    )
    assert wrong.attribution == "extractive"  # the source's own sentence, which has the count
    # A caption is a noun phrase: it answers as a full sentence said of its photo.
    assert wrong.text.startswith("The photo shows the upper floor of the Anchor Hotel")
    assert "six" in wrong.text


# Colours, shapes and materials are facts: the cases a user met on the sample corpus, where
# sentence similarity alone let "Yes, the door is red" cite a door painted blue (0.71).
LIGHTHOUSE_BANDS = Src(
    "i-salt",
    "image",
    "Salt Hollow Lighthouse",
    "The Salt Hollow Lighthouse, a white lighthouse painted with two black bands.",
)
OSPREY = Src(
    "i-osprey",
    "image",
    "Fishing boat Osprey",
    "The fishing boat Osprey moored at Salt Hollow, with a green hull and a white sail.",
)
POND = Src(
    "i-pond", "image", "Pond in Kell Park", "Three ducks on the heart-shaped pond in Kell Park."
)
TAVERN = Src(
    "i-gull", "image", "Gull Tavern", "The Gull Tavern, with a green door and three windows."
)
DUCKS = Src(
    "i-ducks", "image", "Millbrook Green", "Six ducks swimming on the pond in Millbrook Green."
)
CHAPEL = Src(
    "i-chapel",
    "image",
    "Window of the Chapel of St. Aidan",
    "The star-shaped window of the Chapel of St. Aidan, glazed in yellow glass.",
)


@pytest.mark.parametrize(
    ("question", "raw", "source", "replaced_by"),
    [
        (
            "Is the door of the Harbor Inn red?",
            "Yes, the door of the Harbor Inn is red [1].",
            DOOR,
            "No, the photo shows a wooden door painted blue at the Harbor Inn [1].",
        ),
        (
            "Does the Salt Hollow Lighthouse have red stripes?",
            "Yes, the Salt Hollow Lighthouse has red stripes [1].",
            LIGHTHOUSE_BANDS,
            "No, the photo shows the Salt Hollow Lighthouse, a white lighthouse painted with two "
            "black bands [1].",
        ),
        (
            "Are there more than three ducks on the pond in Millbrook Green?",
            "No, there are not more than three ducks on the pond [1].",
            DUCKS,
            "Yes, the photo shows six ducks swimming on the pond in Millbrook Green [1].",
        ),
    ],
)
def test_a_yes_or_no_the_source_contradicts_gives_way_to_the_sources_verdict(
    attributor, question, raw, source, replaced_by
):
    checked = attributor.attribute(question, answered(raw, [source]))
    assert checked.attribution == "extractive" and checked.text == replaced_by


def test_a_no_that_names_the_right_colour_is_supported(attributor):
    question = "Does the Salt Hollow Lighthouse have red stripes?"
    raw = "No, the stripes of the Salt Hollow Lighthouse are black, not red [1]."
    checked = attributor.attribute(question, answered(raw, [LIGHTHOUSE_BANDS]))
    assert checked.attribution == "model" and checked.citations[0].source_id == "i-salt"


def test_a_colour_said_of_another_part_does_not_answer(attributor):
    question = "What colour is the sail of the Osprey?"
    wrong = attributor.attribute(
        question, answered("The sail of the Osprey is green [1].", [OSPREY])
    )
    assert wrong.attribution == "extractive"  # the caption, which says the sail is white
    right = attributor.attribute(question, answered("The Osprey's sail is white [1].", [OSPREY]))
    assert right.attribution == "model"
    hull = "What colour is the hull of the Osprey?"
    assert attributor.attribute(hull, answered("The hull is white [1].", [OSPREY])).attribution != (
        "model"
    )
    # A colour the answer gives the hull loosely counts, beside one it binds to the word hull;
    # the white of "a white sail" does not.
    mixed = "The hull of the Osprey is a white, with a green hull and a white sail [1]."
    assert attributor.attribute(hull, answered(mixed, [OSPREY])).attribution != "model"
    both = "The Osprey has a green hull and a white sail [1]."
    assert attributor.attribute(hull, answered(both, [OSPREY])).attribution == "model"
    glass = "What color is the glass in the window of the Chapel of St. Aidan?"
    said = attributor.attribute(glass, answered("The glass in the window is yellow [1].", [CHAPEL]))
    assert said.attribution == "model"  # "St." ends no sentence, so the caption is one


@pytest.mark.parametrize(
    ("question", "raw", "source"),
    [
        ("What shape is the pond in Kell Park?", "The pond in Kell Park is rectangular [1].", POND),
        (
            "What is the roof of the Gull Tavern made of?",
            "The roof of the Gull Tavern is made of stone and wood [1].",
            TAVERN,
        ),
        (
            "What colour is the roof of the Gull Tavern?",
            "The Gull Tavern has a green door [1].",
            TAVERN,
        ),
        (
            "What is the name of the cat at the Gull Tavern?",
            "The Gull Tavern is a tavern [1].",
            TAVERN,
        ),
    ],
)
def test_invented_attributes_and_answers_to_another_question_are_not_cited(
    attributor, question, raw, source
):
    checked = attributor.attribute(question, answered(raw, [source]))
    assert checked.citations == [] or checked.attribution == "extractive"
    if checked.attribution == "extractive":  # only the source's own words, saying what was asked
        said = checked.text.removeprefix("The photo shows ").lower()  # a caption, of its photo
        assert said.startswith(source.text.rstrip(".").lower())
    else:
        assert checked.abstained


def test_attribute_words_are_facts_and_a_denied_one_is_not_asserted():
    said = terms("No, the stripes are black, not red; the gray door is wooden.")
    assert said.attributes == {"black", "grey", "wood"}
    assert terms("The Red Door of the Anchor Hotel").words >= {"red", "door"}
    assert verdict(read_question("Is the door of the Harbor Inn blue?"), DOOR.text) == "yes"
    assert verdict(read_question("Is the roof of the Harbor Inn blue?"), DOOR.text) is None


def test_an_answer_about_this_photo_cites_it_or_a_source_about_what_it_shows(attributor):
    """Seen on a real bus photo: SmolLM2 framed a retrieved cat's caption as the bus's text,
    and the caption, quoted whole, verifies the sentence; the pipeline then reads the photo."""
    from mmrag.generation.scene_text import cites_what_is_pointed_at

    photo = Src("upload-1", "image", "Your image", "", ocr_text="10 cero emisiones")
    cat = Src("i-cat", "image", "Cat", "A tabby cat looking to the side.")
    buses = Src("s-bus", "text", "Buses", "Madrid's buses run on natural gas.")
    question = "What does the text on the side of this bus say?"
    raw = 'The text on the side of the bus says: "A tabby cat looking to the side" [2].'
    framed = answered(raw, [photo, cat])
    # Grounded word by word, the verifier now declines it itself; were it kept, it cites
    # nothing about this bus.
    assert attributor.attribute(question, framed).attribution == "declined"
    assert not cites_what_is_pointed_at(read_question(question), framed, "upload-1")
    read = answered('The bus says "cero emisiones" [1].', [photo, cat])
    assert cites_what_is_pointed_at(read_question(question), read, "upload-1")
    about_buses = answered("Madrid's buses run on natural gas [2].", [photo, buses])
    assert cites_what_is_pointed_at(read_question(question), about_buses, "upload-1")
    assert cites_what_is_pointed_at(read_question("What colour is the cat?"), framed, "upload-1")


def test_a_page_of_ocr_text_is_extracted_a_line_at_a_time_not_whole(attributor):
    """A text-dense upload with no full stop in it used to be "extracted" whole: an 80 KB
    answer that dumped its OCR. The text read in an image is cut at its lines."""
    from mmrag.indexes.sources import OcrLine, Source

    filler = [OcrLine(f"harbor inn door red blue bus stop {n}", 0.9, ()) for n in range(300)]
    answer_line = OcrLine("The door of the Harbor Inn is blue", 0.95, ())
    page = Source("upload-1", "image", "Your image", "", ocr=(*filler[:150], answer_line))
    question = "What colour is the door of the Harbor Inn?"
    checked = attributor.attribute(question, answered("It is red [1].", [page]))
    assert checked.attribution == "extractive", checked
    said = 'The text in the image reads "The door of the Harbor Inn is blue".'
    assert checked.text_without_markers == said  # one line, said where it was read
