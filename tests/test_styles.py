"""Answers from text written in any style (issue 38): each kind of sentence the issue names,
written for these tests (not taken from the sample), asked through the verification step every
answer takes (`Attributor.attribute`, with the model's raw sentence as SmolLM2 writes such
answers), and the right answer, the right decline or the right cut asserted with its source.

A source's statements are candidates whatever their shape; the answer is the one that gives
what the question asks of its thing; a claim is refused where its source says otherwise.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from mmrag.generation.reading.question import read_question
from mmrag.generation.verification.attribution import DECLINE
from tests.helpers import Src, answered

EXCHANGE = Src(
    "exchange",
    "text",
    "Corn Exchange, Pellham",
    "The Corn Exchange stands on the market square in Pellham. It was built in 1862 by the "
    "architect Amos Reed. Its roof was relaid in Welsh slate in 1931.",
)
CHAPEL = Src(
    "chapel",
    "text",
    "St Ives chapel",
    "The chapel's woodwork is the work of Thomas Bell, a joiner from Hallam. He carved the "
    "pulpit and the choir stalls in 1898.",
)
BOWL = Src(
    "bowl", "text", "Hollin Bowl (museum label)", "Oak, carved. Lent by the Hollin Trust, 2003."
)
BUSES = Src(
    "buses",
    "text",
    "Kellington 14 bus: weekday timetable",
    "From Kellington Square. First departure 06:50, last 22:10. Every 20 minutes.",
)
KAYAKS = Src("kayaks", "image", "Bream Cove", "Four red kayaks on the shore at Bream Cove")
STEW = Src(
    "stew",
    "text",
    "Slow beef stew",
    "Brown the beef in batches. Simmer for 40 minutes with the lid on. Serve with bread.",
)
KETTLE = Src(
    "kettle",
    "text",
    "Brisa K2 kettle: care",
    "The Brisa K2 holds 1.7 litres. Descale every 3 months with citric acid.",
)
GRANARY = Src(
    "granary",
    "text",
    "Pellham granary",
    "The granary was the largest building in Pellham until 1962, when the new hall replaced it.",
)
FOOTBRIDGE = Src(
    "footbridge",
    "text",
    "Wend lifting bridge opens",
    "HARWICK, 2 March - The Wend footbridge opened to walkers on Friday. At 64 metres, the "
    "bridge is longer than the old ferry slipway, though much narrower.",
)
BELLS = Src(
    "bells",
    "text",
    "Fifty years on the bell ropes",
    "'I rang my first peal at St Melor's when I was twelve,' said Ruth Penhale, 64. 'A full "
    "peal takes me just over three hours,' she said.",
)
LIBRARY = Src(
    "library",
    "text",
    "Harwick library: opening hours",
    "Weekdays 09:00-17:00. Closed on Sundays.",
)
SIGHTS = Src(
    "sights",
    "text",
    "Harwick: 3 places to see",
    "1. Harwick Mill - free, closed Tuesdays. 2. The Lantern Museum - 300 ship lanterns. 3. "
    "The quay.",
)
KESTREL = Src(
    "kestrel", "text", "Kestrel 3 tent: specifications", "Packed weight 2.1 kg. Sleeps three."
)
PIERS = Src(
    "piers",
    "text",
    "Sennen piers",
    "The north pier is 300 metres long, twice the length of the old harbour wall.",
)


@pytest.mark.parametrize(
    ("question", "raw", "sources", "says", "cites"),
    [
        (  # a pronoun-led sentence is about what its source names
            "What is the roof of the Corn Exchange made of?",
            "The roof of the Corn Exchange is made of stone [1].",
            [EXCHANGE],
            "Welsh slate",
            "exchange",
        ),
        (  # "he" is the person the sentence before it names
            "Who carved the pulpit of St Ives chapel?",
            "The pulpit was carved by monks [1].",
            [CHAPEL],
            "Thomas Bell",
            "chapel",
        ),
        (  # a museum label's verbless line
            "Who lent the Hollin Bowl?",
            "The Hollin Bowl was lent by a collector [1].",
            [BOWL],
            "Hollin Trust",
            "bowl",
        ),
        (  # a timetable row
            "What time is the first 14 bus from Kellington?",
            "The first bus leaves at noon [1].",
            [BUSES],
            "06:50",
            "buses",
        ),
        (  # a count in a caption's number word
            "How many kayaks are on the shore at Bream Cove?",
            "There are two kayaks [1].",
            [KAYAKS],
            "four red kayaks",
            "kayaks",
        ),
        (  # a recipe's instruction
            "How long is the beef stew simmered?",
            "The stew is simmered for two hours [1].",
            [STEW],
            "40 minutes",
            "stew",
        ),
        (  # a manual's instruction
            "How often should I descale the Brisa K2 kettle?",
            "You should descale it every week [1].",
            [KETTLE],
            "every 3 months",
            "kettle",
        ),
        (  # an interview's "me" is the person quoted
            "How long does it take Ruth Penhale to ring a full peal?",
            "It takes her two hours [1].",
            [BELLS],
            "three hours",
            "bells",
        ),
        (  # "the bridge" is the footbridge its page is about, not another thing
            "How long is the Wend footbridge?",
            "The Wend footbridge is 20 metres long [1].",
            [FOOTBRIDGE],
            "64 metres",
            "footbridge",
        ),
    ],
    ids=[
        "pronoun-led",
        "he-the-person-before",
        "label",
        "timetable",
        "caption-count",
        "recipe",
        "manual",
        "quoted-speaker",
        "compound-by-its-last-part",
    ],
)
def test_a_statement_of_any_shape_answers(attributor, question, raw, sources, says, cites):
    checked = attributor.attribute(question, answered(raw, sources))
    assert says.lower() in checked.text.lower(), checked.text
    assert [c.source_id for c in checked.citations] == [cites], checked.text
    assert not checked.abstained and checked.text.rstrip().endswith((".", "”", '"')), checked.text


def test_a_former_state_is_not_turned_round(attributor):
    """The source: the granary "was the largest building … until 1962, when the new hall
    replaced it"; the hall was not the largest until 1962."""
    question = "Which building was the largest in Pellham until 1962?"
    checked = attributor.attribute(
        question,
        answered("The new hall was the largest building in Pellham until 1962 [1].", [GRANARY]),
    )
    assert "new hall was the largest" not in checked.text, checked.text
    assert checked.abstained or "granary was the largest" in checked.text.lower(), checked.text


def test_a_yes_no_verdict_is_read_from_its_sentence(attributor):
    question = "Is the granary still the largest building in Pellham?"
    checked = attributor.attribute(
        question,
        answered("Yes, the granary was the largest building in Pellham until 1962 [1].", [GRANARY]),
    )
    assert checked.text.startswith("No"), checked.text
    assert checked.citations and checked.citations[0].source_id == "granary"


@pytest.mark.parametrize(
    ("question", "raw", "opens"),
    [
        ("Is the Harwick library open on Sundays?", "Yes, it is open on Sundays [1].", "No"),
        ("Is the Harwick library closed on Sundays?", "No, it is open on Sundays [1].", "Yes"),
    ],
    ids=["open-when-closed", "closed-when-closed"],
)
def test_a_verdict_from_a_line_that_says_the_opposite_state(attributor, question, raw, opens):
    """ "Closed on Sundays" answers whether the library is open on Sundays: no."""
    checked = attributor.attribute(question, answered(raw, [LIBRARY]))
    assert checked.text.startswith(opens), checked.text
    assert "Closed on Sundays" in checked.text, checked.text
    assert [c.source_id for c in checked.citations] == ["library"], checked.text


@pytest.mark.parametrize(
    ("question", "raw", "opens", "says"),
    [
        ("Is Harwick Mill open on Tuesdays?", "Yes, it is open on Tuesdays [1].", "No", "closed"),
        (
            "How many ship lanterns does the Lantern Museum have?",
            "It has 20 lanterns [1].",
            "",
            "300 ship lanterns",
        ),
    ],
    ids=["verdict-from-item-1", "count-from-item-2"],
)
def test_a_numbered_lists_items_each_answer(attributor, question, raw, opens, says):
    """ "1. Harwick Mill - free, closed Tuesdays." is an item about the mill, not "1.", and
    "3." alone is no statement."""
    checked = attributor.attribute(question, answered(raw, [SIGHTS]))
    assert checked.text.startswith(opens) and says in checked.text, checked.text
    assert [c.source_id for c in checked.citations] == ["sights"], checked.text
    assert "“1.”" not in checked.text and "“3.”" not in checked.text, checked.text


def test_a_word_that_only_describes_gives_no_verdict(attributor):
    """ "Packed weight 2.1 kg" says what the tent weighs packed, nothing of packing it wet."""
    question = "Can I pack the Kestrel 3 tent away wet?"
    checked = attributor.attribute(question, answered("Yes, you can pack it wet [1].", [KESTREL]))
    assert not checked.text.startswith("Yes"), checked.text


def test_another_things_measure_is_no_answer(attributor):
    """The snippet gives the north pier's length and compares the wall with it: the wall is
    never said to be 300 metres long. Declining, or quoting what the snippet says of the pier
    (from which a reader works the wall out), are both true to it."""
    question = "How long is the old harbour wall at Sennen?"
    checked = attributor.attribute(
        question, answered("The old harbour wall is 300 metres long [1].", [PIERS])
    )
    assert "wall is 300" not in checked.text, checked.text
    assert checked.abstained or "north pier is 300 metres" in checked.text, checked.text


LANE = Src(
    "lane",
    "text",
    "Tanner's Lane, Harwick",
    "Tanner's Lane is barely 2.5 metres wide between its walls and climbs from the quay.",
)


@pytest.mark.parametrize(
    ("question", "raw", "source", "says"),
    [
        ("How wide is Tanner's Lane?", "Tanner's Lane is 3 metres wide [1].", LANE, "2.5 metres"),
        ("How long is Tanner's Lane?", "Tanner's Lane is 300 metres long [1].", LANE, None),
        ("How long is the Wend footbridge?", "It is 20 metres long [1].", FOOTBRIDGE, "64"),
        ("How high is the Wend footbridge?", "It is 20 metres high [1].", FOOTBRIDGE, None),
    ],
    ids=["width-for-wide", "width-not-for-long", "longer-for-long", "longer-not-for-high"],
)
def test_a_measure_answers_only_the_dimension_it_is_said_in(
    attributor, question, raw, source, says
):
    """A number in metres is a length of some kind: "2.5 metres wide" says how wide the lane
    is and nothing of how long; "at 64 metres, the bridge is longer …" nothing of its height."""
    checked = attributor.attribute(question, answered(raw, [source]))
    if says is None:
        assert checked.abstained and checked.text == DECLINE, checked.text
    else:
        assert says in checked.text and not checked.abstained, checked.text
        assert [c.source_id for c in checked.citations] == [source.id], checked.text


ARMS = Src(
    "arms", "text", "Harwick Arms", "The Harwick Arms has 12 guest rooms and a bar on the quay."
)


@pytest.mark.parametrize(
    ("question", "raw", "source"),
    [
        ("How much does the Brisa K2 kettle cost?", "The Brisa K2 holds 1.7 litres [1].", KETTLE),
        (  # "cost" read as a noun by the parser: the question still asks a price
            "What does a room at the Harwick Arms cost per night?",
            "A room at the Harwick Arms costs £12 per night [1].",
            ARMS,
        ),
    ],
    ids=["how-much", "what-does-it-cost"],
)
def test_an_on_topic_sentence_without_the_asked_fact_is_declined(attributor, question, raw, source):
    """A price asked, the product's size or the inn's rooms said: no source answers."""
    checked = attributor.attribute(question, answered(raw, [source]))
    assert checked.abstained and checked.text == DECLINE, checked.text


def test_a_cut_never_leaves_a_verb_without_what_it_said():
    """A claim whose invented object is cut is not kept as "…, and was known."."""
    from mmrag.generation.verification.attribution import supported_parts
    from mmrag.generation.verification.grounding import Gap

    claim = "The Corn Exchange was built in 1862, and was known for its glass dome."
    dome = claim.index("for its glass dome")
    gaps = [Gap(dome, len(claim) - 1, "for its glass dome", "no cited source says it", "noun")]
    parts = [
        part.text
        for part in supported_parts(read_question("When was the Corn Exchange built?"), claim, gaps)
    ]
    assert "The Corn Exchange was built in 1862, and was known." not in parts
    assert "The Corn Exchange was built in 1862." in parts


def test_a_hedged_fact_is_not_stated_as_certain(attributor):
    source = Src(
        "bridge",
        "text",
        "Packhorse Bridge",
        "The Packhorse Bridge is believed to have been built by monks in the 1620s.",
    )
    question = "Who built the Packhorse Bridge?"
    checked = attributor.attribute(
        question, answered("The Packhorse Bridge was built by monks [1].", [source])
    )
    assert "believed" in checked.text or checked.abstained, checked.text


TRAP = Src(
    "trap", "text", "Gamekeeper's trap (museum label)", "Never used, according to the donor."
)
FERRY = Src(
    "ferry",
    "text",
    "Wenlow chain ferry",
    "The chain ferry was the only crossing of the Wenlow until 1958, when the road bridge opened.",
)
GATE = Src("gate", "text", "Wicket gate (museum label)", "Brass latch, oak frame.")
HARBOUR = Src("harbour", "image", "Penmorra harbour", "Penmorra Harbour Lighthouse at dusk")


@pytest.mark.parametrize(
    ("question", "raw", "source", "opens", "says"),
    [
        (  # "ever" only says when the question asks of; the label denies the use
            "Was the gamekeeper's trap ever used?",
            "Yes, the gamekeeper's trap was used [1].",
            TRAP,
            "No,",
            "Never used, according to the donor",
        ),
        (  # what the ferry is said to be ("the only crossing"), bounded in time, asked of now
            "Is the chain ferry still the only crossing of the Wenlow?",
            "Yes, the chain ferry is the only crossing [1].",
            FERRY,
            "No,",
            "until 1958",
        ),
    ],
    ids=["ever-denied-by-a-verbless-label", "still-the-noun-it-was"],
)
def test_a_verdict_from_a_label_or_a_former_noun(attributor, question, raw, source, opens, says):
    checked = attributor.attribute(question, answered(raw, [source]))
    assert checked.text.startswith(opens), checked.text
    assert says in checked.text and [c.source_id for c in checked.citations] == [source.id]


def test_a_choice_of_one_word_options_after_their_thing(attributor):
    """ "the gate's latch brass or iron" offers brass and iron, not "gate latch brass"."""
    question = read_question("Is the gate's latch brass or iron?")
    assert question.kind == "choice" and set(question.choices) == {
        frozenset({"brass"}),
        frozenset({"iron"}),
    }
    checked = attributor.attribute(question, answered("The latch is iron [1].", [GATE]))
    assert "Brass latch" in checked.text and checked.citations[0].source_id == "gate", checked.text


def test_a_line_without_a_verb_must_still_name_the_asked_role(attributor):
    """A caption of the place's lighthouse (which the tagger takes for a person) names no
    mayor: no answer to "Who is the mayor …?"."""
    question = "Who is the mayor of Penmorra?"
    checked = attributor.attribute(question, answered("The mayor is Jo Penrose [1].", [HARBOUR]))
    assert checked.abstained and checked.text == DECLINE, checked.text


def test_the_option_a_sentence_picks_is_the_one_it_does_not_compare_with():
    """What `bench.fit_selection` labels a choice's candidates by: the option a sentence picks
    (the one before "than"), not any option it names."""
    from mmrag.generation.verification.selection import picked

    question = read_question("Which is older, the Wexley Mill or the Tanhouse Barn?")
    mill, barn = question.choices
    assert picked(question, "The Tanhouse Barn is older than the Wexley Mill.") == barn
    assert picked(question, "The Wexley Mill, built in 1790, is the older of the two.") == mill
    assert picked(question, "The Wexley Mill and the Tanhouse Barn are both of brick.") is None


HOURS = Src(
    "hours",
    "text",
    "Wrenfield Garden Centre - Ashby Road",
    "Open: Mon-Sat 9am-5.30pm; Sun 10.30am-4pm. Café: last orders 4pm. Parking: free.",
)
FERRY = Src(
    "ferry",
    "text",
    "Tarrow chain ferry - winter times",
    "No crossings on Christmas Day. Round trip approx. 1 hr, with 20 min ashore at Tarrow Point. "
    "Departs the slipway 10.15, 12.15 and 14.15.",
)
MOOR = Src(
    "moor", "text", "Hesketh Moor - walks", "Moor path: 9 km, the whole way round. Dogs welcome."
)
LAKE = Src(
    "lake",
    "text",
    "Hesketh Reservoir - facts and figures",
    "Built: 1889-1894. Shore path: 6.4 km, the whole way round. Swimming: not permitted.",
)
SHOW = Src(
    "show",
    "text",
    "'Our marrows are bigger than ever'",
    "KESTLEY, 3 May - The Kestley Allotment Society has 60 plots. The society's marrow show "
    "moved to the village hall in 2015. It is held on the first Saturday in September.",
)
REOPENED = Src(
    "reopened",
    "text",
    "Kestley hall reopens after repairs",
    "KESTLEY, 3 May - The village hall reopened on Saturday after a year of repairs. Its roof "
    "was relaid in slate.",
)
TILLER = Src(
    "tiller",
    "text",
    "Borrow T4 - specifications",
    "Engine: 120 cc four-stroke. Working width: 40 cm. Warranty: 2 years.",
)
TILLER_PLUS = Src(
    "tiller-plus",
    "text",
    "Borrow T4 Plus - specifications",
    "Engine: 140 cc four-stroke. Working width: 45 cm. Warranty: 3 years.",
)


@pytest.mark.parametrize(
    ("question", "raw", "source", "says"),
    [
        (  # "9am-5.30pm" was one token and no number; "10.15" a decimal
            "What time does the Wrenfield Garden Centre close on a Saturday?",
            "The garden centre closes at 6pm [1].",
            HOURS,
            "9am-5.30pm",
        ),
        ("What time does the first Tarrow ferry leave?", "It leaves at 9:00 [1].", FERRY, "10.15"),
        (  # the parser ended a sentence at "approx." and another at "hr"
            "How long is the round trip on the Tarrow chain ferry in winter?",
            "The round trip takes three hours [1].",
            FERRY,
            "1 hr, with 20 min ashore",
        ),
    ],
    ids=["opening-hours", "dotted-clock", "abbreviation"],
)
def test_text_as_people_write_it_is_read(attributor, question, raw, source, says):
    checked = attributor.attribute(question, answered(raw, [source]))
    assert says in checked.text and not checked.abstained, checked.text
    assert [c.source_id for c in checked.citations] == [source.id], checked.text


def test_it_under_a_headline_is_the_thing_before_it():
    """A news page's title is a headline, not the thing its "It" stands for: "It is held on
    the first Saturday" is the marrow show's date, not the headline's."""
    from mmrag.generation.verification.statements import statements

    said = [statement.said for statement in statements([SHOW])]
    assert "The society's marrow show is held on the first Saturday in September." in said, said
    assert not any("bigger than ever' is held" in text for text in said), said
    said = [statement.said for statement in statements([REOPENED])]  # not its dateline's place
    assert "The village hall’s roof was relaid in slate." in said, said


@pytest.mark.parametrize(
    ("question", "sources", "says"),
    [
        (  # a letter left out of "reservoir": the moor's path matched as well before
            "how far is the path round the resevoir at hesketh",
            [MOOR, LAKE],
            "6.4 km",
        ),
        (  # "Plus" is a name in the question and a conjunction to the tagger in the title
            "How long is the warranty on a Borrow T4 Plus?",
            [TILLER, TILLER_PLUS],
            "3 years",
        ),
    ],
    ids=["misspelt", "a-name-the-tagger-reads-as-a-word"],
)
def test_the_thing_asked_about_is_told_from_its_neighbour(attributor, question, sources, says):
    checked = attributor.attribute(question, answered("It is 12 [1].", sources))
    assert says in checked.text and not checked.abstained, checked.text


FERRY_FARES = Src(
    "ferry-fares",
    "text",
    "Penhallow ferry: fares",
    "Adults £4 return. Bicycles £2. Dogs £1 each way.",
)
TEA_ROOM = Src(
    "tea-room",
    "text",
    "Brindle Mill tea room",
    "Open daily, 10:00-17:00, Easter to October only. Cash or card.",
)
AT_A_GLANCE = Src(
    "glance",
    "text",
    "Porthcarrow at a glance",
    "Harbour: drying, 40 moorings. Lifeboat: none since 1961.",
)


@pytest.mark.parametrize(
    ("question", "raw", "source", "says"),
    [
        (  # declined before: no sentence says "free", so none gave a verdict
            "Do dogs ride free on the Penhallow ferry?",
            "Yes, dogs ride free [1].",
            FERRY_FARES,
            "Dogs £1 each way",
        ),
        (  # shown before: every word of "Porthcarrow has a lifeboat" is in the source
            "Does Porthcarrow have a lifeboat?",
            "Yes, Porthcarrow has a lifeboat [1].",
            AT_A_GLANCE,
            "Lifeboat: none since 1961",
        ),
        (  # "Yes" before: it says "open", and one word of a long question could be missing
            "Is Brindle Mill's tea room open in winter?",
            "Yes, it is open in winter [1].",
            TEA_ROOM,
            "Easter to October only",
        ),
    ],
    ids=["no-sentence-says-yes-or-no", "a-yes-no-source-gives", "said-of-another-season"],
)
def test_a_yes_no_question_no_source_settles_is_answered_by_what_it_says(
    attributor, question, raw, source, says
):
    """A yes or a no is said only where a source says it; where none does, the sentence that
    speaks to the question is quoted as it is, for the reader to judge."""
    checked = attributor.attribute(question, answered(raw, [source]))
    assert says in checked.text and not checked.abstained, checked.text
    assert not checked.text.startswith(("Yes", "No")), checked.text
    assert [c.source_id for c in checked.citations] == [source.id], checked.text


RAINY_DAY = Src(
    "rainy-day",
    "text",
    "Wetherley: five things to do when it rains",
    "Brindle Mill tour - 50 minutes, booking needed. Wetherley Lido - heated to 28°C, "
    "lanes till noon.",
)
MOORINGS = Src(
    "moorings",
    "text",
    "Porthcarrow harbour",
    "Three moored dinghies and a crabber sit in Porthcarrow harbour at low tide.",
)


def test_a_fact_on_its_things_noun_is_said_of_that_thing():
    """The parser hangs "booking needed" on the line, so "booking" was the subject the tour's
    50 minutes were said of; the minutes hang on "Brindle Mill tour" itself. The Lido's 28°C
    is said of the Lido, not the tour."""
    from mmrag.generation.verification.selection import FEATURES, features
    from mmrag.generation.verification.statements import statements

    of_topic = FEATURES.index("type_of_topic")
    question = read_question("How long is the Brindle Mill tour?")
    found = {s.text: features(question, s)[of_topic] for s in statements([RAINY_DAY])}
    assert found["Brindle Mill tour - 50 minutes, booking needed."] == 1.0, found
    question = read_question("How warm is the Brindle Mill pool?")
    found = {s.text: features(question, s)[of_topic] for s in statements([RAINY_DAY])}
    assert found["Wetherley Lido - heated to 28°C, lanes till noon."] == 0.0, found


def test_a_participle_says_its_verb_of_its_noun(attributor):
    """ "Three moored dinghies" says the dinghies are moored: it was read as naming a kind."""
    question = "How many dinghies are moored in Porthcarrow harbour?"
    checked = attributor.attribute(question, answered("There are 5 dinghies [1].", [MOORINGS]))
    assert "Three moored dinghies" in checked.text and not checked.abstained, checked.text
    assert [c.source_id for c in checked.citations] == ["moorings"], checked.text


LIGHTHOUSE = Src(
    "penmoor-light",
    "image",
    "Penmoor light",
    "A white lighthouse with two black bands on the cliff",
)
APP_FAQ = Src(
    "app-faq",
    "text",
    "Reedbook app: questions and answers",
    "Is there a dark mode? Yes: it follows your phone's setting. Can I renew an ebook? Only "
    "audiobooks can be renewed.",
)


def test_an_open_request_needs_no_word_of_its_asking():
    """ "What does … look like?" asks for the look of its thing: a caption that never says
    "look" answers it (it scored as saying none of the question's words)."""
    from mmrag.generation.verification.selection import choose

    question = read_question("What does the Penmoor lighthouse look like?")
    found = choose(question, [LIGHTHOUSE])
    assert found is not None and "two black bands" in found.said, found


def test_a_question_in_a_source_is_no_statement():
    """A FAQ's "Is there a dark mode?" asks; it was quoted as an answer ("Yes, is there a dark
    mode?"). Its answer after it is a statement."""
    from mmrag.generation.verification.statements import statements

    said = [statement.text for statement in statements([APP_FAQ])]
    assert not any(text.endswith("?") for text in said), said
    assert "Only audiobooks can be renewed." in said, said


def test_a_yes_no_question_nothing_speaks_to_is_declined(attributor):
    """The tea room's page says when it opens and how to pay, nothing of bookings: no line of
    it is quoted as if it answered."""
    question = "Does the Brindle Mill tea room take bookings?"
    checked = attributor.attribute(question, answered("Yes, it takes bookings [1].", [TEA_ROOM]))
    assert checked.abstained and checked.text == DECLINE, checked.text


FARES_2024 = Src(
    "fares-2024", "text", "Trevose ferry: 2024 fares", "Adult single £3.40. Child single £1.70."
)
FARES_2023 = Src(
    "fares-2023", "text", "Trevose ferry: 2023 fares", "Adult single £3. Child single £1.50."
)


def test_a_question_of_one_year_is_answered_by_that_years_page():
    """Near-duplicate pages that differ in their year: 2024's fare does not answer a question
    about 2023, and with only 2024's page the question is declined."""
    from mmrag.generation.verification.selection import choose

    question = read_question("How much was an adult single on the Trevose ferry in 2023?")
    found = choose(question, [FARES_2024, FARES_2023])
    assert found is not None and found.statement.source.id == "fares-2023", found
    assert "£3." in found.said and "£3.40" not in found.said, found
    assert choose(question, [FARES_2024]) is None


SAILINGS = Src(
    "sailings",
    "text",
    "Trevose ferry: summer sailings",
    "Sailings daily, 12 April to 3 October. First boat 09:15, last 17:40.",
)
NURSERY = Src(
    "nursery",
    "text",
    "Larkspur Nursery - Polwenna",
    "Open: Mon-Sat 9am-5pm; Sun 10.30am-4.30pm.",
)


@pytest.mark.parametrize(
    ("question", "source"),
    [
        # "3" of "3 October" and the ordinal "First" were taken for a count of boats
        ("How many boats does the Trevose ferry have?", SAILINGS),
        # the tagger read "Sun" before its hours as an organisation that owns the nursery
        ("Who owns Larkspur Nursery?", NURSERY),
        # "Café" read as a person; a line with no verb was let off saying "owns"
        ("Who owns Larkspur Nursery?", replace(NURSERY, text="Café: last orders 4pm.")),
    ],
    ids=["a-day-of-a-date-is-no-count", "a-day-of-the-week-is-no-owner", "no-verb-no-owner"],
)
def test_a_timetables_dates_answer_no_count_and_no_name(question, source):
    """Timetables and opening hours are full of numbers and day names: none of them answers
    how many, or who."""
    from mmrag.generation.verification.selection import choose

    assert choose(read_question(question), [source]) is None


@pytest.mark.parametrize(
    "text", ["Does Nancarrow's sell chocolate?", "Does Carveth's in Lanner sell chocolate?"]
)
def test_a_question_opening_with_does_is_a_yes_no_question(text):
    """The parser read "Does" as the main verb of these, and them as asking for a fact."""
    assert read_question(text).kind == "yes_no"


BITTER_LABEL = Src(
    "fulmar-label",
    "text",
    "Fulmar Best Bitter - bottle label",
    "FULMAR BEST BITTER. Amber bitter, brewed with Fuggles hops.",
)


def test_a_line_that_only_names_an_option_does_not_choose_it():
    """A label's name line picks "Fulmar Best Bitter" by naming it, and says nothing of which
    is stronger: it was the answer, cited."""
    from mmrag.generation.verification.selection import choose

    question = read_question("Which is stronger, Fulmar Best Bitter or Pollock Stout?")
    assert choose(question, [BITTER_LABEL]) is None


def test_a_property_asked_by_its_noun_is_answered_by_its_value():
    """ "What's the strength of …?" asks a value, and a label's "4.5% ABV" line gives it: the
    question was read as asking for a thing called a strength, which no line names."""
    from mmrag.generation.verification.selection import choose

    question = read_question("What's the strength of Fulmar Best Bitter?")
    label = replace(BITTER_LABEL, text=f"{BITTER_LABEL.text} 4.5% ABV · 500 ml.")
    chosen = choose(question, [label])
    assert chosen is not None and "4.5% ABV" in chosen.said, chosen


def test_the_owner_a_pronoun_stands_for_is_no_fact_of_its_sentence():
    """ "Its parapets were raised in 1802" read with its "its" named ("The Packhorse Bridge,
    Kelsby’s parapets …") gave "Kelsby", which the tagger takes for a person, as who built the
    bridge, and was chosen over the sentence that says who is said to have built it."""
    from mmrag.generation.verification.selection import choose

    bridge = Src(
        "packhorse-bridge",
        "text",
        "The Packhorse Bridge, Kelsby",
        "Its parapets were raised in 1802 after a pony fell into the river. Local tradition "
        "says it was built by monks from Bodmin Priory, but no record survives.",
    )
    chosen = choose(read_question("Who is said to have built the Packhorse Bridge?"), [bridge])
    assert chosen is not None and "built by monks" in chosen.said, chosen


def test_a_sentence_that_says_a_state_has_ended_settles_whether_it_still_holds(attributor):
    """ "Yes, the bridge crosses the Fowey …" was shown for "Is it still the only crossing of
    the Fowey?": the first sentence to speak to the question said yes, though the next says it
    was the only crossing until 1934. That sentence settles it, for the model's answer and for
    the sentence chosen in its place."""
    bridge = Src(
        "clapper",
        "text",
        "Clapper bridge, Polwenna",
        "The clapper bridge crosses the Fowey at the foot of the village. It was the only "
        "crossing of the river until 1934, when the Mill Road bridge opened.",
    )
    question = "Is the clapper bridge still the only crossing of the Fowey?"
    raw = "Yes, the clapper bridge crosses the Fowey at the foot of the village [1]."
    checked = attributor.attribute(question, answered(raw, [bridge]))
    assert checked.text.startswith("No, "), checked.text
    assert "was the only crossing of the river until 1934" in checked.text, checked.text
    assert [c.source_id for c in checked.citations] == ["clapper"]


def test_a_line_with_no_subject_goes_on_about_the_thing_before_it():
    """A timetable's "Journey to Tregony Road 22 minutes." names no train: it goes on about
    the trains of the line before it, as a reader takes it, so it answers how long the train
    takes (and still not how long a bus does)."""
    from mmrag.generation.verification.selection import choose

    timetable = Src(
        "pengelly",
        "text",
        "Pengelly Light Railway: 2026 season",
        "Trains daily, 1 April to 31 October. Every 45 minutes. Journey to Tregony Road 22 "
        "minutes. Dogs £2 each way.",
    )
    train = read_question("How long does the train take from Pengelly to Tregony Road?")
    chosen = choose(train, [timetable])
    assert chosen is not None and "22 minutes" in chosen.said, chosen
    assert choose(read_question("How long does the bus take to Tregony Road?"), [timetable]) is None


DOME_TENT = Src(
    "dome-tent",
    "text",
    "Kestle Dome 3 tent: pitching guide",
    "Pitching takes about 15 minutes with two people. Cross the three colour-coded poles over "
    "the inner tent.",
)
DAMSON_JAM = Src(
    "damson-jam",
    "text",
    "Morwen's damson jam",
    "Boil hard, uncovered, for 12 min, until a spoon drawn across the bottom leaves a channel.",
)
INN_BLOG = Src(
    "inn-blog",
    "text",
    "Three nights in Polwenna",
    "We stayed at the Gurnard, a three-room inn on the quay, and our landlady, Demelza Rowe, "
    "cooked the best breakfast of the trip.",
)
CLUB_INTERVIEW = Src(
    "club-interview",
    "text",
    "Five minutes with... the Polwenna gig club",
    "'Six of us wanted to row again,' says founder Tamsin Pascoe, a retired harbour pilot.",
)


MOWER_SPEC = Src(
    "mower-spec",
    "text",
    "Hallow 40 lawnmower - specifications",
    "Cutting width: 40 cm. Grass box: 45 l. Run time: 50 minutes a charge. Warranty: 2 years "
    "(parts and labour).",
)
POLWENNA_FARES = Src(
    "polwenna-fares",
    "text",
    "Polwenna ferry - fares",
    "Return fares: adult £6.00, child 5-15 £3.00, under-5s free. Dogs travel free.",
)


@pytest.mark.parametrize(
    ("question", "source", "says"),
    [
        # the "3" of its name was taken for a count the question holds, and "two people"
        # answered as a count of the thing
        ("How many poles does the Kestle Dome 3 tent have?", DOME_TENT, "three colour-coded"),
        # "across" made the boil's 12 min a width
        ("How long does Morwen's damson jam boil for?", DAMSON_JAM, "12 min"),
        # the asked verb was looked for as a verb, and the question declined
        ("Who runs the Gurnard in Polwenna?", INN_BLOG, "Demelza Rowe"),
        ("Who started the Polwenna gig club?", CLUB_INTERVIEW, "Tamsin Pascoe"),
        # the question's word in other words: WordNet's synonyms
        ("How long is the guarantee on the Hallow 40 lawnmower?", MOWER_SPEC, "2 years"),
        ("how much is a kids return on the polwenna ferry", POLWENNA_FARES, "child 5-15 £3.00"),
    ],
    ids=[
        *("a-number-of-a-name", "a-time-is-no-width", "a-landlady-runs-it"),
        *("a-founder-started-it", "a-guarantee-is-a-warranty", "kids-are-children"),
    ],
)
def test_what_is_asked_is_read_as_its_source_says_it(question, source, says):
    """A count of poles, not of people; a time in minutes, whatever else its sentence spans;
    "Who runs …?" said by naming its landlady, "Who started …?" by its founder; a spec sheet's
    "Warranty" for a "guarantee", a fare table's "child" for "kids"."""
    from mmrag.generation.verification.selection import choose

    found = choose(read_question(question), [source])
    assert found is not None and says in found.said, found


REPAIR_CAFE = Src(
    "repair-cafe",
    "text",
    "Trevose Repair Café: what we mend",
    "Bring it along on the first Saturday of the month. We do not repair: microwaves, gas "
    "appliances, phone screens.",
)
CLERK_NOTICE = Src(
    "clerk-notice",
    "text",
    "Notice: Larkspur Halt",
    "Ticket clerk on duty Mon-Fri, 07:00-10:00. Buy tickets on the train at other times.",
)
POND_REPORT = Src(
    "pond-report",
    "text",
    "Trevose mill pond at record low",
    "TREVOSE, 4 August - The mill pond was 30% full on Monday, its lowest level since records "
    "began in 1980, the trust said.",
)
MUSEUM_CLOSURE = Src(
    "museum-closure",
    "text",
    "Trevose museum closes",
    "The Trevose net loft museum is closed for six weeks from 1 June.",
)
CHAPEL_GUIDE = Src(
    "chapel-guide",
    "text",
    "Larkspur chapel",
    "The Larkspur chapel is known for its painted ceiling, finished in 1780 by a travelling "
    "artist.",
)


def test_a_word_written_with_its_accent_is_the_same_word():
    """The question's "cafe" is the title's "Café": without it the notice's line did not say
    the topic and the question was declined."""
    from mmrag.generation.verification.selection import choose

    question = read_question("Will the repair cafe in Trevose fix my microwave?")
    found = choose(question, [REPAIR_CAFE])
    assert found is not None and "We do not repair: microwaves" in found.said, found


@pytest.mark.parametrize(
    ("question", "source"),
    [
        # "Mon-Fri" was taken for a name, the one the question asks for
        ("What's the name of the ticket clerk at Larkspur Halt?", CLERK_NOTICE),
        # "since" of a date gave the reason the question asks for
        ("Why is the Trevose mill pond so low?", POND_REPORT),
        ("Why is the Trevose net loft museum closed?", MUSEUM_CLOSURE),
    ],
    ids=["days-name-no-one", "since-a-date-is-no-reason", "for-a-time-is-no-reason"],
)
def test_what_only_looks_like_the_asked_fact_is_declined(question, source):
    """A timetable's days are no one's name; "since" or "for" with a date says when or how
    long, not why."""
    from mmrag.generation.verification.selection import choose

    assert choose(read_question(question), [source]) is None


def test_what_a_thing_is_known_for_says_why_it_is_known():
    """ "known for its painted ceiling" answers "Why is it well known?", though a date follows."""
    from mmrag.generation.verification.selection import choose

    found = choose(read_question("Why is the Larkspur chapel well known?"), [CHAPEL_GUIDE])
    assert found is not None and "painted ceiling" in found.said, found


STOVE_CARE = Src(
    "stove-care",
    "text",
    "Trewin 4 stove: care and repair",
    "Clean the burner with a dry brush; never put the stove in water. A cracked burner cap "
    "can be replaced: spares are sent free for the first year.",
)


def test_what_only_may_be_replaced_is_no_former_state():
    """ "can be replaced" was read as "was replaced", a state that has ended, so the sentence
    that says the spares are free answered "No"."""
    from mmrag.generation.verification.selection import choose

    question = read_question("Are spare burner caps for the Trewin stove free?")
    found = choose(question, [STOVE_CARE])
    assert found is not None and found.said.startswith("Yes,"), found
    assert "spares are sent free" in found.said, found


STONE_CROSS = Src(
    "stone-cross",
    "text",
    "Polwenna stone cross",
    "The cross is believed to date from around 1420. It stands at the top of Fore Street.",
)


def test_a_hedge_is_read_where_the_fact_is_not_in_the_title(attributor):
    """The doubt was looked for in the sentence holding most of the claim's names: the title
    "Polwenna stone cross", which names the thing and says no date. It is in the sentence that
    gives the date, so the date is said with its doubt."""
    question = "When was the Polwenna stone cross made?"
    raw = "The Polwenna stone cross was made in 1420 [1]."
    checked = attributor.attribute(question, answered(raw, [STONE_CROSS]))
    assert "believed" in checked.text and not checked.abstained, checked.text
    assert [c.source_id for c in checked.citations] == ["stone-cross"], checked.text


MUSSEL_BLOG = Src(
    "mussel-blog",
    "text",
    "A wet week in Polwenna (and why I'd go back)",
    "The rain never stopped, and the gig club's regatta was called off. Go in October: "
    "apparently that's when the mussels are at their best.",
)


def test_an_answer_of_the_prompts_labels_alone_gives_way_to_the_sentence_that_answers(
    attributor,
):
    """SmolLM2 answered with its source's title and the prompt's label ("… (text) [1].") and
    the verifier let it through, though it says nothing. The writer now hands on no answer of
    the model's, and no failure either: the source's sentence answers, its hedge kept. No model
    here writes that on demand, so a loopback OpenAI-compatible server does."""
    from mmrag.generation import AnswerWriter
    from mmrag.generation.engines.openai_http import OpenAIEngine
    from tests.openai_recorder import recording_server

    question = "When are Polwenna's mussels at their best?"
    with recording_server(lambda _body: f"{MUSSEL_BLOG.title} (text) [1].") as server:
        engine = OpenAIEngine("m", base_url=server.url)
        written = AnswerWriter(engine).write(question, [MUSSEL_BLOG])
    assert written.generation_error is None and written.text == ""
    checked = attributor.attribute(question, written)
    assert checked.attribution == "extractive", checked.text
    assert "Go in October: apparently" in checked.text, checked.text
    assert [c.source_id for c in checked.citations] == ["mussel-blog"]


FOOTBRIDGE_NEWS = Src(
    "footbridge-news",
    "text",
    "Polwenna footbridge opens",
    "POLWENNA, 30 April - The Polwenna footbridge opened to walkers on Monday. At 88 metres, "
    "the bridge is longer than the Trevose viaduct, though far lower. It cost £4.1 million.",
)
# Its first sentence names more of the claim than the one that compares, and ends a ferry.
# (the title names less: the evidence's first sentence wins a tie)
CREEK_FOOTBRIDGE_NEWS = Src(
    "creek-footbridge-news",
    "text",
    "New footbridge opens",
    "POLWENNA, 30 April - The Polwenna Creek footbridge opened on Monday, ending the chain "
    "ferry that had crossed Polwenna Creek since 1890. At 88 metres, the bridge is longer than "
    "the Trevose viaduct, though far lower.",
)


@pytest.mark.parametrize(
    ("raw", "shown", "source"),
    [
        ("The Trevose viaduct is longer than the Polwenna footbridge [1].", None, FOOTBRIDGE_NEWS),
        ("The Trevose viaduct is longer [1].", None, FOOTBRIDGE_NEWS),
        (
            "The Polwenna footbridge is longer than the Trevose viaduct, while the Trevose "
            "viaduct is longer at 95 metres [1].",
            "The Polwenna footbridge is longer than the Trevose viaduct [1].",
            FOOTBRIDGE_NEWS,
        ),
        (
            "The Polwenna Creek footbridge is longer than the Trevose viaduct [1].",
            "The Polwenna Creek footbridge is longer than the Trevose viaduct [1].",
            CREEK_FOOTBRIDGE_NEWS,
        ),
    ],
    ids=[
        *("turned-round", "the-compared-one-alone", "a-clause-that-turns-it-round-is-cut"),
        "the-ferry-it-ended-bounds-the-ferry",
    ],
)
def test_a_comparison_is_said_of_the_thing_its_source_says_it_of(attributor, raw, shown, source):
    """ "X is longer than Y" says nothing longer of Y: every word of "Y is longer than X" is in
    the source, and the claim, or the clause after it that turned it round, was shown. And the
    right claim is not refused as no longer holding: "ending the chain ferry" bounds the ferry,
    in the sentence that names most of the claim."""
    thing = "Polwenna Creek" if source is CREEK_FOOTBRIDGE_NEWS else "Polwenna"
    question = f"Which is longer, the {thing} footbridge or the Trevose viaduct?"
    checked = attributor.attribute(question, answered(raw, [source]))
    if shown is None:
        assert checked.abstained, checked.text
    else:
        assert checked.text == shown and checked.attribution == "model", checked.text
    assert not re.search(r"viaduct is longer", checked.text), checked.text


def test_a_choice_asked_by_a_comparative_is_answered_only_by_a_sentence_that_compares():
    """A sentence that names one option and compares nothing was chosen for "Which is
    longer …?": the footbridge's opening, as if it answered. It now answers only where a
    sentence says which is longer; where none does, the question is declined."""
    from mmrag.generation.verification.selection import choose

    question = read_question("Which is longer, the Polwenna footbridge or the Trevose viaduct?")
    opened = "POLWENNA, 30 April - The Polwenna footbridge opened to walkers on Monday."
    alone = replace(FOOTBRIDGE_NEWS, text=opened)
    assert choose(question, [alone]) is None
    compared = replace(alone, text=f"{opened} It is longer than the Trevose viaduct.")
    chosen = choose(question, [compared])
    assert chosen is not None
    assert chosen.said == "The Polwenna footbridge is longer than the Trevose viaduct.", chosen


def test_a_bound_in_time_is_read_in_the_clause_it_bounds():
    """A bound is of the thing its clause is about, a verb joined to another sharing its
    subject; a sentence that names nothing asked keeps every bound it has."""
    from mmrag.generation.reading.text import read

    opened = read("The Trevose footbridge opened on Monday, ending the chain ferry.")
    assert not opened.former(frozenset({"footbridge"})) and opened.former(frozenset({"ferry"}))
    assert opened.former()
    bottled = read("Its water was bottled and sold as a cure for sore eyes until 1910.")
    assert bottled.former(frozenset({"water"}))


WASHER = Src(
    "washer",
    "text",
    "Trembath T4 pressure washer: first use",
    "Stand the washer on level ground. Before first use, add 0.4 litres of pump oil: the pump "
    "is shipped empty. Keep the lance pointed away from people.",
)


FERRY_PHOTO = Src(
    "ferry-photo",
    "image",
    "Kittiwake Star at Porthcarrow",
    "The blue-and-white ferry Kittiwake Star moored at Porthcarrow quay, with gulls on her rail",
)


MARINA = Src(
    "marina",
    "text",
    "'We could fill it twice over'",
    "Trennick marina has 210 berths and a waiting list as long as the quay. 'When I started "
    "you could have any berth you liked,' said its harbourmaster, Jory Penrose. 'Now the "
    "average wait is about four years.'",
)


CHEESE = Src(
    "cheese",
    "text",
    "Trevissa Blue (cheese label)",
    "Made by hand in small batches. The milk is delivered each morning from a herd of forty "
    "Jerseys at Pentire Farm.",
)


@pytest.mark.parametrize(
    ("question", "source", "said"),
    [
        # The parser hangs "add 0.4 litres" on "the pump is shipped empty", so the measure was
        # said of the pump; an instruction's clause is the reader's to do, to what its source
        # names.
        pytest.param(
            "How much oil do I add to a new Trembath T4?", WASHER, "0.4 litres", id="instruction"
        ),
        # "painted" was taken for the thing coloured (no noun follows "What colours" but a
        # name) and for a relation the caption must say; a colour's value says it.
        pytest.param(
            "What colours is the Kittiwake Star painted?",
            FERRY_PHOTO,
            "blue-and-white",
            id="colour",
        ),
        # A headline names nothing, so "Now the average wait is about four years." was about
        # nothing; a report is about what its first sentence names, and a measure of the asked
        # relation ("the wait") is said of its thing.
        pytest.param(
            "How long is the wait for a berth at Trennick marina?", MARINA, "four years", id="lead"
        ),
        # "come from" asked the label to say "come"; a verb that says where only with its
        # preposition asks the preposition.
        pytest.param(
            "Where does the milk for Trevissa Blue come from?", CHEESE, "Pentire Farm", id="light"
        ),
    ],
)
def test_a_statement_answers_what_is_asked_whatever_its_clause_says_it_by(
    question: str, source: Src, said: str
):
    """Each statement answers once it is read as a person reads it: the fact, said of the
    question's thing, in the asked relation however the question or the parse puts it."""
    from mmrag.generation.verification.selection import choose

    found = choose(read_question(question), [source])
    assert found is not None and said in found.said, found


def test_an_instruction_with_a_preposition_is_still_quoted_as_its_sources():
    """An instruction reads as the source's ("Add to the pan the leeks you sliced earlier." is
    no claim of the answer's own): only an infinitive's "to" makes a base-form verb no
    instruction, never the preposition after it."""
    from mmrag.generation.verification.statements import statements

    soup = Src(
        "soup", "text", "Leek and potato soup", "Add to the pan the leeks you sliced earlier."
    )
    (found,) = statements([soup])
    assert (
        found.said
        == "The source “Leek and potato soup” says: “Add to the pan the leeks you sliced earlier.”"
    )
