"""What a sentence asserts, as sets of words a lexical check can compare: its content words,
and the facts an answer cannot get wrong (numbers, names, colours, shapes and materials).

Attribute words are facts like numbers because they are what small models invent: "Yes, the
door is red" for a door painted green, "red stripes" for "two black bands", "rectangular" for
a heart-shaped pond. Sentence similarity rates those pairs close (0.71, 0.62); a word list does
not. Variants of one attribute read as one ("grey"/"gray", "wooden"/"wood",
"triangular"/"triangle"), and an attribute a sentence denies ("black, not red") is not asserted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mmrag.generation.citations import is_abbreviation


def _stem():
    import Stemmer

    return Stemmer.Stemmer("english").stemWord


STEM = _stem()

# Function words, and words any answer may add without asserting a fact.
STOPWORDS = frozenset(
    {
        "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
        "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both",
        "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few",
        "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers",
        "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its",
        "itself", "just", "me", "more", "most", "many", "much", "my", "myself", "no", "nor", "not",
        "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out",
        "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the",
        "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those",
        "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when",
        "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your",
        "yours", "yourself", "yourselves", "yes", "one", "ones", "answer", "answers", "source",
        "sources", "according", "image", "images", "photo", "photos", "picture", "pictures",
        "shown", "shows", "show", "caption", "text", "called", "named", "known", "located",
        "there's", "it's", "colour", "color", "colours", "colors", "coloured", "colored", "shape",
        "shapes", "shaped", "material", "materials", "made",
    }
)  # fmt: skip
# Number words read as numbers: models write "five ducks" for a caption's "Five ducks" and
# answer "3" for "three red bands". ("one" stays a word: "the red one" counts nothing.)
NUMBER_WORDS = {
    "zero": "0", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13",
    "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17", "eighteen": "18",
    "nineteen": "19", "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "hundred":
    "100", "thousand": "1000"
}  # fmt: skip


def _attributes(kind: str, groups: str) -> dict[str, tuple[str, str]]:
    """ "grey gray, wood wooden timber" -> {"gray": ("grey", kind), "wooden": ("wood", kind), ...}:
    each word to its group's first word and the kind of attribute it names."""
    table = {}
    for group in groups.split(","):
        words = group.split()
        table.update({word: (words[0], kind) for word in words})
    return table


# Words that name one attribute, by kind. Left out on purpose: words that are often something
# else ("cross", "arch", "flat", "tin", "cast").
ATTRIBUTES = {
    **_attributes(
        "colour",
        "red, orange, yellow, green, blue, purple, violet, pink, brown, black, white, grey gray, "
        "silver, gold golden, beige, turquoise, maroon, navy, cream, crimson, scarlet, teal, "
        "cyan, magenta, ivory, indigo, lilac",
    ),
    **_attributes(
        "shape",
        "circle circular round, square, rectangle rectangular oblong, triangle triangular, "
        "diamond, heart, star, oval, octagon octagonal, hexagon hexagonal, crescent, spiral, "
        "cone conical, cylinder cylindrical, sphere spherical, dome domed, cube",
    ),
    **_attributes(
        "material",
        "wood wooden timber, stone, brick, metal metallic, steel, iron, glass, concrete, "
        "marble, granite, plastic, copper, bronze, brass, slate, thatch thatched, sandstone, "
        "limestone, clay, paper, cloth, canvas, silk, cotton, leather, straw, bamboo, "
        "ceramic, porcelain, terracotta",
    ),
}
ATTRIBUTE_KIND = dict(ATTRIBUTES.values())
_PLURAL = {f"{word}s": word for word in ATTRIBUTES if not word.endswith("s")}
# An attribute this close after one of these is denied, not asserted: "black, not red".
NEGATIONS = frozenset({"not", "never", "neither", "nor", "without", "isn't", "aren't", "wasn't"})
NEGATION_REACH = 3

_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+(?:['’][^\W\d_]+)?")
_DIGIT = re.compile(r"^\d")
_CLAUSE_END = re.compile(r"[,;:.!?]")
_SENTENCE_GAP = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")


def attribute(word: str) -> str | None:
    """The attribute a lower-case word names ("gray" -> "grey", "stars" -> "star"), if any."""
    entry = ATTRIBUTES.get(word) or ATTRIBUTES.get(_PLURAL.get(word, ""))
    return entry[0] if entry else None


@dataclass(frozen=True)
class Terms:
    """A text's content: stems of its words, its numbers, its names (capitalised words not
    at the start of the text) and its attributes (colours, shapes, materials it asserts);
    numbers lose their thousands separators ("5,895" = "5895")."""

    words: frozenset[str]
    numbers: frozenset[str]
    names: frozenset[str]
    attributes: frozenset[str]

    @property
    def key(self) -> frozenset[str]:
        """What an answer cannot get wrong: its numbers, names and attributes."""
        return self.numbers | self.names | self.attributes

    def of_kind(self, kind: str) -> frozenset[str]:
        return frozenset(word for word in self.attributes if ATTRIBUTE_KIND[word] == kind)


def denies(token: str) -> bool:
    """A word that denies what follows it: "not", "never", "isn't", "doesn’t"."""
    lower = token.lower().replace("’", "'")
    return lower in NEGATIONS or lower.endswith("n't")


def as_number(token: str) -> str | None:
    """The number a token states ("5,895" -> "5895", "Five" -> "5"), if any."""
    if _DIGIT.match(token):
        return token.replace(",", "").rstrip(".")
    return NUMBER_WORDS.get(token.lower())


def terms(text: str) -> Terms:
    words, numbers, names, attributes = set(), set(), set(), set()
    denied_until, previous_end = -1, 0
    for position, match in enumerate(_TOKEN.finditer(text)):
        token = match.group()
        if _CLAUSE_END.search(text, previous_end, match.start()):  # "not red; the gray door"
            denied_until = -1
        previous_end = match.end()
        lower = token.lower()
        if denies(token):
            denied_until = position + NEGATION_REACH
            continue
        number = as_number(token)
        if number:
            numbers.add(number)
            words.add(number)
            continue
        if lower in STOPWORDS:
            continue
        named = token[0].isupper() and position > 0
        quality = None if named else attribute(lower)
        if quality is not None:
            if position > denied_until:
                attributes.add(quality)
                words.add(quality)
            continue
        stem = STEM(lower)
        words.add(stem)
        if named:  # "the Red Door of the Anchor Hotel" still says the door is red
            names.add(stem)
            words.add(attribute(lower) or stem)
    return Terms(frozenset(words), frozenset(numbers), frozenset(names), frozenset(attributes))


# The verbs questions ask about, said in other words by sources ("Who founded the bakery?",
# "opened by Mara Quell"). Small and explicit: a lexical check cannot know paraphrase, and an
# embedding would take antonyms ("close", "open") for synonyms. An NLI verifier knows more.
SAME_RELATION = tuple(
    frozenset(STEM(word) for word in group)
    for group in (
        ("founded", "established", "opened"),
        ("built", "constructed", "erected"),
        ("owns", "owner"),
        ("born", "birth"),
        ("died", "death"),
        ("wrote", "written", "author"),
        ("stripes", "bands"),
    )
)


def with_synonyms(words: frozenset[str]) -> frozenset[str]:
    """The words, and every other word of a `SAME_RELATION` group one of them is in."""
    return words.union(*(group for group in SAME_RELATION if group & words))


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Where each sentence of the text stands, [start, end) without surrounding blanks: cut
    where a sentence ends, not after "St." in "the Chapel of St. Aidan"."""
    cuts, start = [], 0
    for gap in _SENTENCE_GAP.finditer(text):
        if not is_abbreviation(text, gap.start() - 1):
            cuts.append((start, gap.start()))
            start = gap.end()
    cuts.append((start, len(text)))
    spans = []
    for begin, end in cuts:
        part = text[begin:end]
        if part.strip():
            begin += len(part) - len(part.lstrip())
            spans.append((begin, begin + len(part.strip())))
    return spans


def sentences(text: str) -> list[str]:
    return [text[start:end] for start, end in sentence_spans(text)]


# Attributes said of a thing, not merely near it: "a green hull and a white sail" makes the
# sail white. Colours and materials are said as adjectives ("white sail", "yellow paper
# lanterns") or by a linking verb after the noun's phrase ("the hull of the fishing boat Sea
# Lark is painted blue"); shapes are mostly things themselves ("a circle on the flag") and are
# read from the whole sentence.
BOUND_KINDS = frozenset({"colour", "material"})
_LINKING = frozenset(
    {"is", "are", "was", "were", "be", "been", "painted", "coloured", "colored", "glazed", "dyed"}
)
# Where the phrase about the noun ends: "a green hull and a white sail".
_BREAKS = frozenset({"and", "with", "but", "while", "which", "that", "where", "who", "whose"})
_COORDINATING = frozenset({"and", "or", ",", "bright", "dark", "light", "pale", "deep"})
_PHRASE_TOKEN = re.compile(r"\d+|[^\W\d_]+(?:['’][^\W\d_]+)?|[,;:()]")
ADJECTIVE_REACH = 3  # words between an adjective and its noun ("purple hanging sign")
LINK_REACH = 12  # "the glass in the window of the Chapel of St. Aidan is yellow"


def head_noun(text: str, known_names: frozenset[str], kind: str) -> str | None:
    """The stem of the first content word that is no name, number or attribute of the kind
    asked about: what a phrase is about ("the hull of the fishing boat Gannet", "red stripes",
    and for a colour "the heart on the flag")."""
    for token in _PHRASE_TOKEN.findall(text):
        lower = token.lower()
        if not token[0].isalpha() or lower in STOPWORDS or lower in NUMBER_WORDS:
            continue
        quality = attribute(lower)
        if (quality is None or ATTRIBUTE_KIND[quality] != kind) and STEM(lower) not in known_names:
            return STEM(lower)
    return None


def bound_attributes(sentence: str, nouns: frozenset[str], kind: str) -> frozenset[str]:
    """The attributes of a kind that the sentence says of any of the nouns (stems)."""
    lowers = [token.lower() for token in _PHRASE_TOKEN.findall(sentence)]
    return _of_kind(lowers, _bound_positions(lowers, nouns), kind)


def attributes_of_subject(sentence: str, subject: frozenset[str], kind: str) -> frozenset[str]:
    """The attributes of a kind that the sentence says of the subject (stems) or of no noun at
    all: a loose "is a wood-flecked white" counts for the subject, "a white sail" does not."""
    lowers = [token.lower() for token in _PHRASE_TOKEN.findall(sentence)]
    others = {
        STEM(lower)
        for lower in lowers
        if lower[0].isalpha() and lower not in STOPWORDS and not attribute(lower)
    } - subject
    everywhere = {at for at, lower in enumerate(lowers) if attribute(lower)}
    elsewhere = _bound_positions(lowers, frozenset(others)) - _bound_positions(lowers, subject)
    return _of_kind(lowers, everywhere - elsewhere, kind)


def _of_kind(lowers: list[str], positions: set[int], kind: str) -> frozenset[str]:
    found = (attribute(lowers[at]) for at in positions)
    return frozenset(word for word in found if word and ATTRIBUTE_KIND[word] == kind)


def _bound_positions(lowers: list[str], nouns: frozenset[str]) -> set[int]:
    """Where the attributes said of the nouns stand: before a noun as adjectives, or after a
    linking verb in the noun's phrase."""
    said: set[int] = set()
    for at, lower in enumerate(lowers):
        if not lower[0].isalpha() or STEM(lower) not in nouns:
            continue
        for before in range(at - 1, max(at - 1 - ADJECTIVE_REACH, -1), -1):
            if attribute(lowers[before]):
                said |= _coordinated(lowers, before, -1)
                break
            if lowers[before] in STOPWORDS or not lowers[before][0].isalpha():
                break
        for after in range(at + 1, min(at + 1 + LINK_REACH, len(lowers))):
            if lowers[after] in _BREAKS or not lowers[after][0].isalnum():
                break
            if attribute(lowers[after]) and lowers[after - 1] in _LINKING:
                said |= _coordinated(lowers, after, +1)
                break
    return said


def _coordinated(lowers: list[str], start: int, step: int) -> set[int]:
    """Where the attributes listed together from `start` on stand: "green and white",
    "yellow paper"."""
    found, at = set(), start
    while 0 <= at < len(lowers):
        if attribute(lowers[at]):
            found.add(at)
        elif lowers[at] not in _COORDINATING:
            break
        at += step
    return found
