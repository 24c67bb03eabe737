"""Word lists that are data, each kept once: what no library here has.

spaCy tags, lemmatises and parses; bm25s has the stopwords; word2number reads number words.
What remains is the vocabulary of questions and answers that none of them knows: which words
name a colour, shape or material (the facts small models invent, which sentence similarity
rates close: "red door" / "green door" 0.71), units and the dimensions they measure, the
words by which an answer frames itself ("the photo shows"), the nouns a "what …" question
names its answer's type by, pronouns, relation synonyms, and the words that bound a fact in
time or hedge it.
"""

from __future__ import annotations


def _groups(kind: str, groups: str) -> dict[str, tuple[str, str]]:
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
    **_groups(
        "colour",
        "red, orange, yellow, green, blue, purple, violet, pink, brown, black, white, grey gray, "
        "silver, gold golden, beige, turquoise, maroon, navy, cream, crimson, scarlet, teal, "
        "cyan, magenta, ivory, indigo, lilac",
    ),
    **_groups(
        "shape",
        "circle circular round, square, rectangle rectangular oblong, triangle triangular, "
        "diamond, heart, star, oval, octagon octagonal, hexagon hexagonal, crescent, spiral, "
        "cone conical, cylinder cylindrical, sphere spherical, dome domed, cube",
    ),
    **_groups(
        "material",
        "wood wooden timber oak pine, stone, brick, metal metallic, steel, iron, glass, concrete, "
        "marble, granite, plastic, copper, bronze, brass, slate, thatch thatched, sandstone, "
        "limestone, clay, paper, cloth, canvas, silk, cotton, leather, straw, bamboo, "
        "ceramic, porcelain, terracotta, wool woollen, aluminium aluminum",
    ),
}
ATTRIBUTE_KIND = dict(ATTRIBUTES.values())
# Nouns by which a question asks a property of a thing, not which thing: "What colour is the
# door?", "What number is on it?", unlike "Which lake is the deepest?".
ATTRIBUTE_NOUNS = frozenset(
    {"color", "colour", "shape", "material", "number", "kind", "type", "size", "year", "name"}
)
# Units a number is read with: "48-metre", "48 m", "48 meters" are one length; each unit's
# dimension, so "How long …?" is answered in minutes or in metres, never in euros.
UNITS = {
    "m": "metre", "metre": "metre", "meter": "metre", "km": "kilometre", "kilometre": "kilometre",
    "kilometer": "kilometre", "cm": "centimetre", "centimetre": "centimetre",
    "centimeter": "centimetre", "mm": "millimetre", "millimetre": "millimetre",
    "ft": "foot", "foot": "foot", "feet": "foot", "mile": "mile", "inch": "inch",
    "kg": "kilogram", "kilogram": "kilogram", "g": "gram", "gram": "gram", "tonne": "tonne",
    "ton": "tonne", "lb": "pound", "litre": "litre", "liter": "litre", "l": "litre",
    "ml": "millilitre", "millilitre": "millilitre", "gallon": "gallon", "pint": "pint",
    "ounce": "ounce", "oz": "ounce", "cup": "cup", "tablespoon": "tablespoon",
    "tbsp": "tablespoon", "teaspoon": "teaspoon", "tsp": "teaspoon",
    "year": "year", "month": "month", "week": "week", "day": "day", "hour": "hour",
    "minute": "minute", "min": "minute", "hr": "hour", "second": "second", "sec": "second",
    "percent": "percent",
    "%": "percent", "hectare": "hectare", "ha": "hectare", "acre": "acre",
    "degree": "degree", "°c": "degree", "°": "degree", "watt": "watt", "w": "watt",
    "volt": "volt", "v": "volt", "mph": "mph", "kph": "kph",
}  # fmt: skip
UNIT_DIMENSION = {
    **dict.fromkeys(("metre", "kilometre", "centimetre", "millimetre", "foot", "mile", "inch"),
                    "length"),
    **dict.fromkeys(("kilogram", "gram", "tonne", "pound"), "weight"),
    **dict.fromkeys(("litre", "millilitre", "gallon", "pint", "cup", "tablespoon", "teaspoon"),
                    "volume"),
    "ounce": "weight",
    **dict.fromkeys(("year", "month", "week", "day", "hour", "minute", "second"), "duration"),
    **dict.fromkeys(("hectare", "acre"), "size"),
    "percent": "share", "degree": "temperature", "watt": "power", "volt": "voltage",
    "mph": "speed", "kph": "speed",
}  # fmt: skip
# Dimensions a measure is said in. A claim's dimension beside a number is grounded by the
# source's number in the same unit, unless the source says it measures another: "a 48-metre
# tower" is 48 metres tall, "a depth of 214 metres" is not 214 metres wide.
DIMENSIONS = {
    "tall": "height", "high": "height", "height": "height", "long": "length",
    "length": "length", "wide": "width", "width": "width", "broad": "width", "deep": "depth",
    "depth": "depth", "across": "width", "size": "size", "area": "size",
}  # fmt: skip
# What "How <word> …?" asks for: a dimension, said in a unit of it (several where English
# asks both ways: "How long is the bridge?", "How long is the stew simmered?").
HOW_MEASURES = {
    "tall": ("length",), "high": ("length",), "long": ("length", "duration"),
    "wide": ("length",), "broad": ("length",), "deep": ("length",), "far": ("length",),
    "big": ("size", "length"), "large": ("size", "length"), "heavy": ("weight",),
    "old": ("duration", "date", "age"), "often": ("frequency",), "frequently": ("frequency",),
    "fast": ("speed",), "hot": ("temperature",), "warm": ("temperature",),
    "early": ("time",), "late": ("time",), "soon": ("duration", "time"),
}  # fmt: skip
# Nouns by which "what/which <noun>" names the type of its answer; other nouns are the kind
# of thing asked for ("Which street …?": a street, named).
TYPE_NOUNS = {
    **dict.fromkeys(("year", "date", "day", "month", "century", "decade", "season"), "date"),
    **dict.fromkeys(("time", "hour"), "time"),
    **dict.fromkeys(("price", "cost", "fee", "fare", "charge"), "money"),
    **dict.fromkeys(("colour", "color"), "colour"),
    "shape": "shape", "material": "material", "name": "name", "percentage": "share",
    "number": "count",
    "temperature": "temperature", "weight": "weight", "height": "length", "length": "length",
    "depth": "length", "width": "length", "distance": "length", "duration": "duration",
    **dict.fromkeys(("person", "man", "woman", "architect", "artist", "author", "founder",
                     "designer", "builder", "owner", "chef", "mayor", "writer"), "person"),
    **dict.fromkeys(("town", "city", "village", "country", "place", "street", "road",
                     "island", "region", "province", "county", "state", "river", "lake"),
                    "place"),
    **dict.fromkeys(("company", "firm", "organisation", "organization", "club", "team",
                     "band", "charity", "trust", "society", "brand"), "organisation"),
}  # fmt: skip
# Verbs and nouns by which "How much …?" asks a price.
MONEY_WORDS = frozenset({"cost", "price", "pay", "charge", "fee", "fare", "spend", "ticket"})
# Of them, the verbs by which "What does … cost?" asks a price whatever else it names.
MONEY_VERBS = frozenset({"cost", "pay", "spend"})
# What spaCy's entity labels give, by answer type.
ENTITY_TYPES = {
    "PERSON": "person", "NORP": "organisation", "ORG": "organisation", "GPE": "place",
    "LOC": "place", "FAC": "place", "DATE": "date", "TIME": "time", "MONEY": "money",
    "QUANTITY": "quantity", "PERCENT": "share", "CARDINAL": "count", "ORDINAL": "count",
}  # fmt: skip
# The entity label a place's kind noun implies: "Which river …?" is not answered by a town.
KIND_LABELS = {
    **dict.fromkeys(("town", "city", "village", "country", "county", "state", "province"), "GPE"),
    **dict.fromkeys(("river", "lake", "island", "mountain", "sea", "bay", "valley"), "LOC"),
}  # fmt: skip
# Lemmas an answer uses to point at its sources or name the kind of fact it gives, which assert
# nothing about the world: "the photo shows", "according to the source", "a building called
# …", "its colour is", "made of".
FRAMING = frozenset(
    {"answer", "source", "according", "image", "photo", "picture", "caption", "text", "show"}
    | {"call", "name", "know", "locate", "depict", "see", "also", "yes", "one", "mention"}
    | {"colour", "color", "shape", "material", "make", "many", "much", "kind", "type", "sort"}
    | {"say", "read"}  # "the sign saying …", "the text reads …": what a sign says is its text
)
# Pronouns that stand for a thing named before them, and what they make of it when the name
# replaces them ("Its roof" -> "The Corn Exchange’s roof").
THING_PRONOUNS = {"it": "", "its": "’s", "they": "", "their": "’s"}
PERSON_PRONOUNS = {"he": "", "his": "’s", "she": "", "her": "’s", "they": "", "their": "’s"}
PRONOUNS = frozenset(THING_PRONOUNS) | frozenset(PERSON_PRONOUNS) | {"them", "him"}
# A speaker's words for themself: in quoted speech they stand for whoever is quoted.
FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself", "we", "us", "our", "ours"})
# Prepositions after which a name is where something stands ("on Mill Lane").
AT_A_PLACE = frozenset({"in", "on", "at", "near", "beside", "along", "across", "over", "off"})
# The verbs questions ask about, said in other words by sources ("Who founded the bakery?",
# "opened by Mara Quell"), as lemmas. Small and explicit: phrase similarity takes antonyms for
# synonyms ("opened"/"closed in 1983" 0.82, "bought"/"sold by the town" 0.90).
SAME_RELATION = (
    ("found", "establish", "open", "founder", "start"),
    ("run", "manage", "manager", "landlord", "landlady", "proprietor"),
    ("build", "construct", "erect"),
    ("own", "owner"),
    ("bear", "born", "birth"),
    ("die", "death"),
    ("write", "author"),
    ("complete", "finish"),
    ("stripe", "band"),
    ("begin", "start", "first"),
    ("come", "visit", "visitor", "attract"),
    ("get", "receive", "grant", "award"),
    ("live", "inhabitant", "resident", "population"),
    ("work", "employ", "employee", "staff"),
    ("leave", "depart", "departure"),
    ("arrive", "arrival"),
    ("cost", "price"),
    ("make", "carve", "craft"),
    ("lend", "loan", "lent"),
    ("cross", "across", "span", "over"),
    ("hold", "host", "include", "feature"),
    ("hurt", "injure", "injury", "harm"),
)
# Verbs that say where or how only with their preposition ("Where does the leather come
# from?", "What goes in the chutney?"): the preposition is the relation a source must say.
LIGHT_VERBS = frozenset({"come", "go", "get", "put"})
# States a source can answer a yes/no question with the opposite of ("Is it open on Mondays?":
# "closed Mondays"), each with its opposites, as lemmas: the verdict is then the other one.
OPPOSITE_STATES = (
    (("open",), ("close", "shut")),
    (("allow", "permit"), ("ban", "forbid", "prohibit")),
)
# A fact bounded in time: said of the past, no longer so ("was the largest until 1962",
# "formerly", "no longer", "was replaced by").
FORMER = frozenset(
    {"until", "till", "formerly", "former", "once", "previously", "replace", "end", "cease"}
    | {"discontinue", "abolish", "demolish", "retire"}
)
NOW = frozenset({"still", "now", "currently", "today", "anymore", "present", "nowadays"})
# Words that only say when a yes/no question asks of ("Was it ever used?", "Is it open
# yet?"): no answer need say them.
WHEN_ASKED = NOW | {"ever", "yet"}
# A fact said with doubt: kept as said, never stated as certain.
HEDGES = frozenset(
    {"believe", "think", "reportedly", "allegedly", "possibly", "probably", "perhaps", "may"}
    | {"might", "suppose", "rumour", "rumor", "legend", "likely", "claim", "reputedly"}
)
# Words whose only work is to join or weigh ("additionally", "notably"): an answer may add them.
CONNECTIVES = frozenset(
    {"additionally", "also", "moreover", "furthermore", "notably", "however", "overall"}
    | {"various", "several", "many", "numerous", "including", "include", "such", "known"}
    | {"particularly", "especially", "typically", "generally", "usually", "often", "well"}
    | {"significant", "important", "popular", "famous", "notable", "key", "major", "main"}
)
# Words by which a sentence gives a reason ("closed because of flooding", "due to").
REASONS = frozenset(
    {"because", "due", "owing", "since", "result", "cause", "thanks", "so", "after"}
)
# Words that give a time as often as a reason ("since 1958", "after the war", "for six weeks").
TIME_OR_REASON = frozenset({"since", "after", "for"})
# How often: "every 3 months", "daily", "twice a year".
FREQUENCY = frozenset(
    {"every", "daily", "weekly", "monthly", "yearly", "annually", "hourly", "nightly"}
    | {"once", "twice", "times", "fortnightly", "per"}
)
# The days of the week as timetables write them ("Mon-Sat", "Thu-Mon", "Sun"), and the words
# that join them into a range.
WEEKDAYS = frozenset(
    {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
    | {"mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri", "sat", "sun"}
)
MONTHS = frozenset(
    {"january", "february", "march", "april", "may", "june", "july", "august", "september"}
    | {"october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug"}
    | {"sep", "sept", "oct", "nov", "dec"}
)
DAY_RANGE = frozenset({"-", "–", "to", "&", "and", ",", "."})
# Money said without an entity the tagger sees: "£4.50", "12 euros".
CURRENCY = frozenset({"£", "$", "€", "pound", "euro", "dollar", "pence", "penny", "cent"})
