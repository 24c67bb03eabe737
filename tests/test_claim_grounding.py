"""Answers that say only what their sources say: the cases users met (issue 31), each with the
model's own sentence as SmolLM2 wrote it and the sample corpus's own sources.

Every kept word of a cited claim must be grounded in a source it cites: what is not is cut
(when a full sentence that answers remains), or the source's own sentence answers instead, or
the answer declines; what was cut is said, and why.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from mmrag.generation.citations import cite
from mmrag.generation.reading.question import read_question
from mmrag.generation.reading.text import read, read_all
from mmrag.generation.scene_text import asks_about
from mmrag.generation.types import Answer
from mmrag.generation.verification.grounding import Grounder
from mmrag.generation.verification.selection import choose
from mmrag.generation.verification.statements import evidence_text, full_sentence
from tests.helpers import Src, answered

# The sample corpus's own sources (data/sample/WebQA_sample.json).
KELL_PHOTO = Src(
    "30000106",
    "image",
    "Kell Bridge",
    "The Kell Bridge in Dunmore, a grey bridge with three arches.",
)
KELL_TEXT = Src(
    "8bcd0aac588fa9ba77f3813076035237",
    "text",
    "Kell Bridge",
    "The Kell Bridge is a road bridge that carries the old coach road across the River Dun in "
    "Dunmore. It was opened in 1783.",
)
HARBOR_INN = Src(
    "025ff87c44df8a13d4f398ee4b5c1a95",
    "text",
    "Harbor Inn",
    "The Harbor Inn is an inn in Dunmore, built in 1888 by Ivo Brannock, a local brewer. It "
    "served travellers on the old coast road for more than a century.",
)
HARBOR_ROOMS = Src(
    "ebe80fa95c24c1ae7d510557ed4d19b8",
    "text",
    "Harbor Inn",
    "The Harbor Inn has 33 guest rooms and a public bar known for its fish pie. It was listed "
    "as a protected building in 1993. In summer, guests dine in the old stable yard.",
)
UPPER_FLOOR = Src(
    "30000007",
    "image",
    "Upper floor of the Harbor Inn",
    "The upper floor of the Harbor Inn in Dunmore, with four sash windows under the roof.",
)
LANTERNS = Src(
    "30000094",
    "image",
    "Lanterns at the Greywick Lantern Night",
    "Four yellow paper lanterns hanging over the street during the Greywick Lantern Night in "
    "Greywick.",
)
LANTERN_NIGHT = Src(
    "d805d62d9604bf345a5fea38183b60e5",
    "text",
    "Greywick Lantern Night",
    "Highlights of the Greywick Lantern Night include a torchlit procession from the abbey to "
    "the market square, organised by volunteers from the Greywick Civic Society.",
)
ALDRIC_PHOTO = Src(
    "30000064",
    "image",
    "Aldric Tower",
    "The grey stone Aldric Tower rising above the rooftops of Dunmore.",
)
ALDRIC_TEXT = Src(
    "aldric-48",
    "text",
    "Aldric Tower",
    "The Aldric Tower is a 48-metre tower in Dunmore. It was completed in 1821 and is a "
    "landmark visible from across the town.",
)
KESTREL_PHOTO = Src(
    "30000066",
    "image",
    "Kestrel Point Lighthouse",
    "The Kestrel Point Lighthouse at Kestrel Bay, a white lighthouse painted with three red bands.",
)


def cited_texts(answer: Answer) -> list[str]:
    return [evidence_text(answer.sources[c.marker - 1]) for c in answer.citations]


def assert_grounded(answer: Answer, question: str = "") -> None:
    """The answer is one full sentence, cites something, and the grounder finds nothing in it
    that its cited sources do not say."""
    assert answer.citations and not answer.abstained, answer.text
    assert read(answer.text_without_markers).finite(), answer.text
    assert Grounder().gaps(answer.text_without_markers, cited_texts(answer), question) == []


def test_praise_no_source_gives_is_cut_and_the_river_named_from_a_runner_up(attributor):
    question = "Which river does the Kell Bridge cross?"
    raw = (
        "The Kell Bridge in Dunmore, a grey bridge with three arches, is a classic example of a "
        "bridge crossing a river [1]."
    )
    checked = attributor.attribute(question, answered(raw, [KELL_PHOTO]), runners_up=[KELL_TEXT])
    assert "River Dun" in checked.text and "classic" not in checked.text
    assert [s.id for s in checked.sources] == [KELL_PHOTO.id, KELL_TEXT.id]
    assert [c.source_id for c in checked.citations] == [KELL_TEXT.id]
    assert "classic" in checked.cut[0].reason and "example" in checked.cut[0].reason
    assert_grounded(checked, question)


def test_a_clause_said_twice_is_said_once(attributor):
    question = "Who built the Harbor Inn?"
    raw = (
        "The Harbor Inn was built by Ivo Brannock, a local brewer, in 1888 by Ivo Brannock, a "
        "local brewer, in 1888 [1]."
    )
    checked = attributor.attribute(question, answered(raw, [HARBOR_INN]))
    assert checked.text_without_markers.count("Ivo Brannock") == 1
    assert [(cut.text, cut.reason) for cut in checked.cut] == [
        ("by Ivo Brannock, a local brewer, in 1888", "said twice")
    ]
    assert_grounded(checked, question)


@pytest.mark.parametrize(
    ("question", "raw", "source", "said"),
    [
        (
            "Who built the Anchor Hotel, and when?",
            "The Anchor Hotel was built by a local stonemason, Brigid Mallory, in 1891 by a local "
            "stonemason [1].",
            Src(
                "anchor",
                "text",
                "Anchor Hotel",
                "The Anchor Hotel is a hotel in Kestrel Bay, built in 1891 by Brigid Mallory, a "
                "local stonemason.",
            ),
            "The Anchor Hotel was built by a local stonemason, Brigid Mallory, in 1891.",
        ),
        (
            "When was the Thistle Inn listed as a protected building?",
            "The Thistle Inn was listed as a protected building in 1988, and it was listed as a "
            "protected building in 1988 [1].",
            Src(
                "thistle",
                "text",
                "Thistle Inn",
                "The Thistle Inn has 28 guest rooms. It was listed as a protected building in "
                "1988.",
            ),
            "The Thistle Inn was listed as a protected building in 1988.",
        ),
    ],
    ids=["a-phrase-said-again-at-the-end", "a-clause-said-again-after-and-it"],
)
def test_what_is_said_again_further_on_is_said_once(attributor, question, raw, source, said):
    checked = attributor.attribute(question, answered(raw, [source]))
    assert checked.text_without_markers == said
    assert [cut.reason for cut in checked.cut] == ["said twice"]
    assert_grounded(checked, question)


def test_an_apposition_cut_takes_its_commas_with_it(attributor):
    question = "What does the Gannet look like?"
    raw = "The Gannet, a majestic seabird, has a black hull and a red sail [1]."
    boat = Src(
        "30000049",
        "image",
        "Fishing boat Gannet",
        "The fishing boat Gannet moored at Kestrel Bay, with a black hull and a red sail.",
    )
    checked = attributor.attribute(question, answered(raw, [boat]))
    assert checked.text_without_markers == "The Gannet has a black hull and a red sail."
    assert [cut.text for cut in checked.cut] == ["a majestic seabird"]


def test_an_answer_that_names_nothing_asked_of_is_replaced_by_its_source(attributor):
    question = "How many steps do you climb to the top of the Marrow Point Lighthouse?"
    steps = Src(
        "steps",
        "text",
        "Marrow Point Lighthouse",
        "Visitors can climb 221 steps to a lantern room at the top of the Marrow Point Lighthouse.",
    )
    checked = attributor.attribute(question, answered("The answer is: 221 [1].", [steps]))
    assert checked.attribution == "extractive"
    assert checked.text_without_markers.startswith("Visitors can climb 221 steps")


@pytest.mark.parametrize(
    ("question", "source", "said"),
    [
        (
            "How long is the River Grey?",
            Src(
                "173714726c1672297608d9425d111a9d",
                "text",
                "River Grey",
                "The River Grey rises in the Greywick Hills and flows for 41 kilometres before "
                "reaching the Sarn Sea near Greywick. Salmon and sea trout run in it every autumn.",
            ),
            "flows for 41 kilometres",
        ),
        (
            "How big is Millbrook Green?",
            Src(
                "3065cf758a020c5cb9e5113b9d802682",
                "text",
                "Millbrook Green",
                "Millbrook Green covers 36 hectares and includes a duck pond. It is open from dawn "
                "until dusk.",
            ),
            "covers 36 hectares",
        ),
        (
            "How many people live in Estival?",
            Src(
                "ce6ec4ab324ce2dd2d3f0bf3504d7d95",
                "text",
                "Estival",
                "Estival is a province on the far shore of the Sarn Sea. Its capital is Estia, and "
                "it has about 502,000 inhabitants, most of whom live along the coast.",
            ),
            "502,000 inhabitants",
        ),
        (
            "Can you tell me about the Iron Anvil Forge?",
            Src(
                "ef463c53b79ecb4ea95c2c0b07465834",
                "text",
                "Iron Anvil Forge",
                "The Iron Anvil Forge is a forge on Chapel Hill in Greywick, opened in 1896 by Ada "
                "Devereux. It began as a market stall before moving into its present premises.",
            ),
            "The Iron Anvil Forge is a forge on Chapel Hill",  # a request, not a yes/no question
        ),
    ],
    ids=["length-in-kilometres", "size-in-hectares", "people-as-inhabitants", "can-you-tell-me"],
)
def test_a_question_one_source_sentence_answers_is_answered(attributor, question, source, said):
    checked = attributor.attribute(question, answered("Yes [1].", [source]))
    assert checked.attribution == "extractive", checked.text
    assert said in checked.text
    assert_grounded(checked, question)


FORGE_SIGN = Src(
    "30000042",
    "image",
    "Sign of the Iron Anvil Forge",
    "The black hanging sign of the Iron Anvil Forge in Greywick, painted with the word FORGE in "
    "orange letters.",
)
GANNET_PHOTO = Src(
    "gannet-photo",
    "image",
    "Fishing boat Gannet at Marrow Point",
    "The fishing boat Gannet moored at Marrow Point, with a black hull and a red sail.",
)
HARVEST_FAIR = Src(
    "harvest-fair",
    "text",
    "Marrow Point Harvest Fair",
    "The Marrow Point Harvest Fair is an annual festival held in Marrow Point every September.",
)


@pytest.mark.parametrize(
    ("question", "sources", "said"),
    [
        (  # what it is known for, not any sentence about it
            "What is the Iron Anvil Forge known for?",
            [
                FORGE_SIGN,
                Src(
                    "forge-known",
                    "text",
                    "Iron Anvil Forge",
                    "Known for its gate hinges, the Iron Anvil Forge has been run by the same "
                    "family for 5 generations and employs 6 people.",
                ),
            ],
            "Known for its gate hinges",
        ),
        (  # a "fishing boat" says nothing of what she fishes for
            "What does the Gannet fish for?",
            [
                GANNET_PHOTO,
                Src(
                    "gannet-cod",
                    "text",
                    "Gannet (boat)",
                    "The Gannet fishes mainly for cod and is crewed by 6 people.",
                ),
            ],
            "The Gannet fishes mainly for cod",
        ),
        (  # the sentence naming the contests, not one missing only them
            "What contests are held at the Marrow Point Harvest Fair?",
            [
                HARVEST_FAIR,
                Src(
                    "harvest-highlights",
                    "text",
                    "Marrow Point Harvest Fair",
                    "Highlights of the Marrow Point Harvest Fair include an oyster-shucking "
                    "contest and a ploughing match.",
                ),
            ],
            "an oyster-shucking contest",
        ),
    ],
    ids=["known-for", "fishing-boat-is-no-fishing", "what-contests"],
)
def test_the_sentence_that_says_what_is_asked_wins_over_one_about_the_thing(
    attributor, question, sources, said
):
    checked = attributor.attribute(question, answered("Yes [1].", sources))
    assert said in checked.text, checked.text
    assert checked.citations[0].source_id == sources[1].id
    assert_grounded(checked, question)


def test_a_sentence_missing_both_the_asked_kind_and_another_word_does_not_answer(attributor):
    question = "What time does the Lantern Bakery open in the morning?"
    bakery = Src(
        "bakery",
        "text",
        "Lantern Bakery",
        "The Lantern Bakery is a bakery on Mill Lane in Dunmore, opened in 1864 by Piers Devereux.",
    )
    checked = attributor.attribute(question, answered("It opens at 7 [1].", [bakery]))
    assert checked.abstained, checked.text


def test_what_no_source_says_of_an_event_is_not_kept(attributor):
    question = "What is special about the Greywick Lantern Night?"
    raw = (
        "The Greywick Lantern Night is a unique event in the city, with four yellow paper "
        "lanterns hanging over the street during the night [1]."
    )
    checked = attributor.attribute(question, answered(raw, [LANTERNS]), runners_up=[LANTERN_NIGHT])
    said = checked.text.lower()
    assert "unique" not in said and "city" not in said
    assert "unique" in checked.cut[0].reason and "city" in checked.cut[0].reason
    assert_grounded(checked, question)


# Issue 38, open: the fitted selection (generation/verification/weights.json) prefers the
# selected photo's caption to a runner-up's sentence saying what the thing is; strict, so the
# marker must go when a refit or a feature makes it pass.
OPEN_REQUEST_GAP = pytest.mark.xfail(
    strict=True,
    reason="issue 38: the fitted selection prefers the selected photo's caption to a "
    "runner-up's sentence that says what the thing is",
)


@pytest.mark.parametrize(
    ("question", "raw", "sources", "runners_up", "said"),
    [
        pytest.param(
            "Tell me about Aldric Tower.",
            "The Aldric Tower in Dunmore [1].",
            [ALDRIC_PHOTO],
            [ALDRIC_TEXT],
            "The Aldric Tower is a 48-metre tower in Dunmore",  # what it is, said first
            marks=OPEN_REQUEST_GAP,
        ),
        (
            "Describe Kestrel Point Lighthouse.",
            "The Kestrel Point Lighthouse at Kestrel Bay, a white lighthouse painted with three "
            "red bands [1].",
            [KESTREL_PHOTO],
            [],
            "The photo shows the Kestrel Point Lighthouse",
        ),
    ],
    ids=["fragment-replaced-by-the-text-saying-what-it-is", "caption-said-of-its-photo"],
)
def test_a_fragment_becomes_a_full_sentence(attributor, question, raw, sources, runners_up, said):
    checked = attributor.attribute(question, answered(raw, sources), runners_up=runners_up)
    assert said in checked.text
    assert checked.cut and checked.cut[0].text == cite(raw, sources).text_without_markers
    assert_grounded(checked, question)


@OPEN_REQUEST_GAP
def test_an_open_request_is_answered_from_a_source_that_describes_it(attributor):
    question = "Tell me about the Harbor Inn."
    raw = (
        "The Harbor Inn is a luxury hotel located in the 12th floor of the Upper East Side of "
        "the North Shore of Dunmore, with four sash windows under the roof [1]."
    )
    checked = attributor.attribute(
        question, answered(raw, [UPPER_FLOOR]), runners_up=[HARBOR_ROOMS, HARBOR_INN]
    )
    assert checked.attribution == "extractive" and not checked.abstained
    assert checked.text.startswith("The Harbor Inn ")  # a sentence about the inn, not a floor
    assert "luxury" in checked.cut[0].reason and "hotel" in checked.cut[0].reason
    assert_grounded(checked, question)


def test_a_colour_asked_of_a_photo_is_not_answered_with_its_text():
    """A photo of a red door with its house number painted on: the colour is seen, not read;
    its text answers what it says."""
    assert not asks_about(read_question("What color is the door in this photo?"), ["21"])
    assert asks_about(read_question("What number is written on the door in this photo?"), ["21"])


@pytest.mark.parametrize(
    ("claim", "evidence", "ungrounded"),
    [
        (  # a superlative moved out of its scope
            "The Rua is the highest mountain in the world.",
            "Mount Tarn. The Rua, the highest of the mountain's three cones, rises 2,400 m.",
            {"highest", "world"},
        ),
        (  # a caption grown into praise
            "The Orlen horse is a historic statue and a prime example of bronze casting.",
            "Orlen horse statue. The bronze horse in Orlen square stands with one foreleg raised.",
            {"historic", "prime", "example", "casting"},
        ),
        (  # "deepest" grown into "deepest and largest"
            "Lake Veyl is the deepest and largest lake in Norland.",
            "Lake Veyl. Lake Veyl is the deepest lake in Norland.",
            {"largest"},
        ),
        (  # a fact of another thing in the same source
            "John Simpson designed the Ashcombe Bridge.",
            "Ashcombe Bridge. The bridge was designed by Thomas Telford and built by the "
            "contractor John Simpson in 1812.",
            {"Simpson"},
        ),
    ],
    ids=["superlative-scope", "praise", "coordination", "swapped-entity"],
)
def test_what_the_source_does_not_say_is_found(minilm, claim, evidence, ungrounded):
    gaps = Grounder(minilm.encode_texts).gaps(claim, [evidence])
    assert {gap.text for gap in gaps} == ungrounded, gaps
    assert all(claim[gap.start : gap.end] == gap.text and gap.reason for gap in gaps)


@pytest.mark.parametrize(
    ("claim", "evidence"),
    [
        ("The tower was finished in 1821.", "Aldric Tower. The tower was completed in 1821."),
        ("The Corvin Tower is 48 meters tall.", "Corvin Tower. The 48-metre tower stands alone."),
        ("The water drops sixty-seven metres.", "Caldron Falls. The water drops 67 m in a leap."),
        (
            "The harbor office is painted gray.",
            "Harbour office. The harbour office is painted grey.",
        ),
        (
            "The Rua is the highest of the mountain's cones.",
            "Mount Tarn. The Rua, the highest of the mountain's three cones, rises 2,400 m.",
        ),
    ],
    ids=["paraphrase", "unit-and-dimension", "number-words", "spellings", "scope-kept"],
)
def test_what_the_source_says_in_other_words_is_grounded(minilm, claim, evidence):
    assert Grounder(minilm.encode_texts).gaps(claim, [evidence]) == []


def test_an_antonym_is_no_paraphrase(minilm):
    """Phrase similarity rates "closed in 1983" close to "opened in 1983" (0.82): below the
    paraphrase bound, so the claim is not grounded."""
    gaps = Grounder(minilm.encode_texts).gaps(
        "The cafe closed in 1983.", ["Moonlight Cafe. The cafe opened in 1983."]
    )
    assert [gap.text for gap in gaps] == ["closed"]


def test_a_reading_holds_what_the_rules_ask_of_a_text():
    reading = read("The tram of Oldenport, painted black, not red, is the oldest of its 3 trams.")
    words = {word.text: word for word in reading.words}
    assert words["red"].negated and not words["black"].negated
    assert reading.attributes() == {"black"}
    assert [reading.phrases[i].text for i in reading.phrases[0].attached] == ["Oldenport"]
    (degree,) = reading.degrees
    assert (degree.lemma, degree.kind) == ("old", "superlative") and "tram" in degree.scope
    assert read("It rises forty-eight metres.").numbers() == {"48"}
    assert read("It is 48 m tall.").words[2].unit == "metre"
    assert read(reading.text) is reading  # read once, then cached
    assert read_all([reading.text, "Another text."])[0] is reading


def test_the_reading_loads_spacy_without_torch():
    """spaCy's thinc imports torch when it can (1.6 s of a cold start); the reading keeps it
    out, and a later `import torch` in the same process still works."""
    code = (
        "import sys\n"
        "from mmrag.generation.reading.text import read\n"
        "read('The Harbor Inn was built in 1888.')\n"
        "assert 'torch' not in sys.modules, 'spaCy imported torch'\n"
        "import torch\n"
        "print(torch.tensor([1]).item())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "1"


def test_a_photos_title_is_said_with_its_article():
    pond = Src("30000074", "image", "Pond in Willow Gardens", "")
    assert full_sentence(pond.title, pond, "title") == "The photo shows the pond in Willow Gardens"
    bridge = Src("30000106", "image", "Kell Bridge", "")
    assert full_sentence("Kell Bridge", bridge, "title") == "The photo shows Kell Bridge"


@pytest.mark.parametrize(
    ("question", "title", "text", "said"),
    [
        (  # a founder whose name the brewery bears is still its founder
            "Who founded the Hollins Brewery?",
            "Hollins Brewery",
            "The brewery was founded by Agnes Hollins in 1862.",
            "by Agnes Hollins",
        ),
        (  # the subject's name behind its title
            "Who designed the Velmont Viaduct?",
            "Velmont Viaduct",
            "The engineer Agnes Thorley designed the viaduct, completed in 1871.",
            "Agnes Thorley",
        ),
        (
            "Who ran Steeple Ashton Mill?",
            "Steeple Ashton Mill",
            "The mill was run by the Hobbs family until 1921.",
            "the Hobbs family",
        ),
        (  # a place that is no name
            "Where does the kittiwake nest?",
            "Kittiwake",
            "The kittiwake nests on narrow ledges of sea cliffs.",
            "narrow ledges",
        ),
        (
            "Are there swans on the Lisbury canal?",
            "Lisbury canal",
            "Two swans glide past the cottage on the canal.",
            "Yes, two swans",
        ),
        (
            "When was the Tarnby Canal completed?",
            "Tarnby Canal",
            "Work on the canal was finished in 1796.",
            "1796",
        ),
    ],
    ids=[
        "founder-named-like-it",
        "subject-behind-a-title",
        "by-a-family",
        "where-no-name",
        "are-there",
        "finished-is-completed",
    ],
)
def test_a_source_sentence_answers_in_its_own_words(question, title, text, said):
    """Texts written outside the sample corpus (bench/data/verifier_heldout.jsonl)."""
    found = choose(read_question(question), [Src("held-out", "text", title, text)])
    assert found is not None and said in found.said, found


def test_a_named_place_comes_before_a_place_that_is_no_name():
    crown = Src(
        "crown",
        "text",
        "Crown Inn",
        "The Crown Inn is an inn in Greywick. It served travellers on the old coast road.",
    )
    lane = Src("lane", "text", "Crown Inn", "The Crown Inn stands on Mill Lane in Greywick.")
    found = choose(read_question("Where in Greywick is the Crown Inn?"), [crown, lane])
    assert found is not None
    assert (found.said, found.statement.number) == (
        "The Crown Inn stands on Mill Lane in Greywick.",
        2,
    )
