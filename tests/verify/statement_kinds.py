"""A labelled test set of English statements: abstentions versus facts (negated or not).

How it was written
------------------
The data is generated from hand-written templates and slot lists (sources, knower forms,
embedded questions, topic noun phrases, subjects, verb phrases, conditions), combined with
``itertools.product`` and sampled with a fixed ``random.Random(seed)``. It was written from
the definition of the two kinds alone, independently of the classifier it is meant to test:
no classifier code was read, and nothing here is tuned to any implementation.

Kinds
-----
``ABSTENTION``
    A statement about the SOURCES or the ANSWERER'S KNOWLEDGE saying that information is
    missing or cannot be determined. The families cover: a source noun as the subject of a
    negated reporting verb ("The excerpts don't specify whether ..."), "give/provide/contain no
    information on ...", "is silent on", "makes no reference to", "gives no figure for";
    impersonal and passive forms ("There is no mention of X in the sources.", "X is not covered
    in the context.", "No information about X is given.", "Nothing in the text says ...",
    "It is not possible to determine from the passages ...", "Based on the information
    provided, it's unclear ..."); first-person knower forms with I / we / I'm / I've and both
    ASCII and typographic apostrophes ("I couldn't find anything about ...", "I was not able to
    find ...", "I don't have any data on ...", "We can't tell from the snippets ...");
    "None of the articles mention ..."; bare refusals ("Unable to answer based on the given
    passages."). Sources vary over documents, passages, sources, context, text, excerpts,
    material, provided information, knowledge base, articles, records provided, snippets and
    more, singular and plural.

``FACT``
    A statement about the world. Most are negated, since a careless classifier mistakes those
    for abstentions: organisations and products that do not do something, passives ("X is not
    covered by ..."), "There is no fee for ...", "No personal information is collected ...",
    "You cannot ...", "It is not possible to pause a subscription." (an impossibility in the
    world), "Nobody is allowed to ...", eligibility rules, "The course awards no certificate.",
    "never". Many deliberately use words that also occur in abstentions (information, data,
    details, provide, mention, find, available, given, covered, specified, record, source,
    document, text, list, include) about the world. The affirmative facts carry numbers,
    dates, names and conditions. No fact has a document-like noun (policy, manual, guide,
    contract, report) as the subject of a reporting verb, since such sentences are ambiguous.

All topics and names are fictional and generic. Every statement is unique (ignoring the kind of
apostrophe).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Iterable

ABSTENTION = "abstention"
FACT = "fact"

# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _s(verb: str) -> str:
    """Third person singular of a regular verb."""
    if verb.endswith(("ss", "sh", "ch", "x")):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _do_not(plural: bool, contracted: bool) -> str:
    if contracted:
        return "don't" if plural else "doesn't"
    return "do not" if plural else "does not"


def _be(plural: bool) -> str:
    return "are" if plural else "is"


def _verb(verb: str, plural: bool) -> str:
    return verb if plural else _s(verb)


# --------------------------------------------------------------------------------------------
# Slots for abstentions
# --------------------------------------------------------------------------------------------

# (noun phrase without "the", plural?)
SOURCES: list[tuple[str, bool]] = [
    ("documents", True),
    ("provided documents", True),
    ("passages", True),
    ("retrieved passages", True),
    ("given passages", True),
    ("sources", True),
    ("provided sources", True),
    ("context", False),
    ("text", False),
    ("retrieved text", False),
    ("provided text", False),
    ("excerpts", True),
    ("material", False),
    ("provided information", False),
    ("knowledge base", False),
    ("articles", True),
    ("records provided", True),
    ("snippets", True),
    ("search results", True),
    ("supplied documents", True),
]
PLURAL_SOURCES = [src for src, plural in SOURCES if plural]
# Sources without a participle ("provided", "given", ...), for "... the material I was given."
BARE_SOURCES = [src for src, _ in SOURCES if " " not in src]

# Embedded questions: "... say <q>."
QUESTIONS: list[str] = [
    "whether the gym offers towels to members",
    "whether the ferry runs on public holidays",
    "whether the evening course includes a final exam",
    "whether pets are allowed in the rental flats",
    "whether the clinic accepts walk-in patients",
    "whether the loan can be repaid early without a penalty",
    "whether the library lends e-readers",
    "whether the budgeting app works offline",
    "whether the home insurance covers flood damage",
    "whether the hotel has parking for guests",
    "whether international students can apply for the grant",
    "whether the blender jug is dishwasher-safe",
    "whether contractors can use the staff canteen",
    "whether the monthly bus pass is valid on night buses",
    "whether the current account has a monthly fee",
    "whether the photo editor runs on older laptops",
    "whether the museum is open on Mondays",
    "whether vaccination appointments can be rescheduled online",
    "how much the annual gym membership costs",
    "when the outdoor pool reopens",
    "who approves overtime requests",
    "how many students each evening class holds",
    "which bus routes run after midnight",
    "how long the cordless drill's battery lasts",
    "where the nearest branch of the bank is",
    "what the late fee for library books is",
]

# Topic noun phrases: (phrase, plural?)
TOPICS: list[tuple[str, bool]] = [
    ("the cancellation fee", False),
    ("the opening hours of the Elm Road branch", True),
    ("parking at the clinic", False),
    ("the baggage allowance on regional flights", False),
    ("the overdraft interest rate", False),
    ("the dress code for interviews", False),
    ("the start date of the spring course", False),
    ("the energy rating of the dishwasher", False),
    ("the late fee for library books", False),
    ("the relocation allowance", False),
    ("the night-bus timetable", False),
    ("the ferry's rules for cancelled sailings", True),
    ("the excess on the home insurance", False),
    ("the kettle's power consumption", False),
    ("tram fares for students", True),
    ("the clinic's vaccination schedule", False),
    ("visiting hours on the children's ward", True),
    ("the photo editor's system requirements", True),
    ("the hotel's check-in time", False),
    ("the minimum balance on the savings account", False),
    ("how long refunds take to process", False),
    ("the probation period for new hires", False),
    ("the museum's group rates", True),
    ("the rules on pets in the rental flats", True),
]

# Topics for which "no figure" makes sense.
FIGURES: list[str] = [
    "the cancellation fee",
    "the overdraft interest rate",
    "the excess on the home insurance",
    "the late fee for library books",
    "the relocation allowance",
    "the minimum balance on the savings account",
    "the annual gym membership price",
    "the kettle's power consumption",
    "the student tram fare",
    "the maximum loan amount",
    "the course fee for international students",
    "the hotel's parking charge",
]

REPORT_Q = ["say", "state", "specify", "indicate", "mention", "address", "discuss", "explain"]
REPORT_NP = ["mention", "cover", "describe", "address", "discuss", "list"]
SUPPLY = ["give", "provide", "contain", "include", "offer"]
INFO = ["information", "details", "data"]
ABOUT = ["on", "about"]
PASSIVE_NP = ["mentioned", "specified", "covered", "described", "listed", "addressed"]
IN = ["in", "anywhere in"]
ME = ["I", "We"]
NOT = {False: " not", True: "n't"}  # keyed by "contracted?"


def _abstention_families() -> list[tuple[str, list[str], int]]:
    """(family name, candidate pool, how many to draw)."""
    fam: list[tuple[str, list[str], int]] = []
    yes_no = [False, True]

    fam.append(
        (
            "source-does-not-say-question",
            [
                f"The {src} {_do_not(pl, c)} {v} {q}."
                for (src, pl), c, v, q in itertools.product(SOURCES, yes_no, REPORT_Q, QUESTIONS)
            ],
            12,
        )
    )
    fam.append(
        (
            "source-does-not-mention-topic",
            [
                f"The {src} {_do_not(pl, c)} {v} {t}."
                for (src, pl), c, v, (t, _) in itertools.product(SOURCES, yes_no, REPORT_NP, TOPICS)
            ],
            10,
        )
    )
    fam.append(
        (
            "source-gives-no-information",
            [
                f"The {src} {_verb(v, pl)} no {i} {a} {t}."
                for (src, pl), v, i, a, (t, _) in itertools.product(
                    SOURCES, SUPPLY, INFO, ABOUT, TOPICS
                )
            ],
            10,
        )
    )
    fam.append(
        (
            "source-is-silent",
            [
                f"The {src} {_be(pl)} silent on {t}."
                for (src, pl), (t, _) in itertools.product(SOURCES, TOPICS)
            ]
            + [
                f"The {src} {_be(pl)} silent on {q}."
                for (src, pl), q in itertools.product(SOURCES, QUESTIONS)
            ],
            6,
        )
    )
    fam.append(
        (
            "no-mention-in-sources",
            [
                f"{there} no mention of {t} in the {src}."
                for there, (src, _), (t, _) in itertools.product(
                    ["There is", "There's"], SOURCES, TOPICS
                )
            ],
            7,
        )
    )
    fam.append(
        (
            "topic-not-mentioned-passive",
            [
                f"{_cap(t)} {_be(tp)}{NOT[c]} {p} {i} the {src}."
                for (t, tp), c, p, i, (src, _) in itertools.product(
                    TOPICS, yes_no, PASSIVE_NP, IN, SOURCES
                )
            ],
            9,
        )
    )
    fam.append(
        (
            "nothing-in-sources-says",
            [
                f"Nothing in the {src} {v} {q}."
                for (src, _), v, q in itertools.product(
                    SOURCES, ["says", "states", "indicates", "specifies", "tells us"], QUESTIONS
                )
            ],
            8,
        )
    )
    fam.append(
        (
            "knower-cannot-tell",
            [
                f"{who} {cant} tell from the {src} {q}."
                for who, cant, (src, _), q in itertools.product(
                    ME, ["can't", "cannot", "am unable to"], SOURCES, QUESTIONS
                )
                if not (who == "We" and cant == "am unable to")
            ],
            8,
        )
    )
    fam.append(
        (
            "impersonal-not-possible-to-determine",
            [
                f"{lead} from the {src} {q}."
                for lead, (src, _), q in itertools.product(
                    [
                        "It is not possible to determine",
                        "It's impossible to say",
                        "It cannot be determined",
                        "It can't be worked out",
                        "There is no way to tell",
                    ],
                    SOURCES,
                    QUESTIONS,
                )
            ],
            9,
        )
    )
    fam.append(
        (
            "unclear-from-information",
            [
                f"{lead}, it's unclear {q}."
                for lead, q in itertools.product(
                    [
                        "Based on the information provided",
                        "Going by the information I was given",
                        "From what the sources contain",
                        "On the basis of the retrieved passages",
                    ],
                    QUESTIONS,
                )
            ]
            + [
                f"It {isnt} clear from the {src} {q}."
                for isnt, (src, _), q in itertools.product(["is not", "isn't"], SOURCES, QUESTIONS)
            ]
            + [
                f"The {src} {_do_not(pl, c)} make clear {q}."
                for (src, pl), c, q in itertools.product(SOURCES, yes_no, QUESTIONS)
            ],
            9,
        )
    )
    fam.append(
        (
            "knower-could-not-find",
            [
                f"{who} {cf} {anything} {t} in the {src}."
                for who, cf, anything, (t, _), (src, _) in itertools.product(
                    ME,
                    ["couldn't find", "could not find", "didn't find"],
                    ["anything about", "any information on", "any details of"],
                    TOPICS,
                    SOURCES,
                )
            ]
            + [
                f"{who} found nothing about {t} in the {src}."
                for who, (t, _), (src, _) in itertools.product(ME, TOPICS, SOURCES)
            ],
            9,
        )
    )
    fam.append(
        (
            "knower-not-able-to-find",
            [
                f"{who} {able} {t} in the {src}."
                for who, able, (t, _), (src, _) in itertools.product(
                    ["I"],
                    [
                        "was not able to find",
                        "wasn't able to find",
                        "was unable to locate",
                        "have not been able to find",
                        "haven't found",
                    ],
                    TOPICS,
                    SOURCES,
                )
            ]
            + [
                f"{who} {able} {t} in the {src}."
                for who, able, (t, _), (src, _) in itertools.product(
                    ["We"],
                    ["were not able to find", "weren't able to find", "couldn't locate"],
                    TOPICS,
                    SOURCES,
                )
            ]
            + [
                f"{im} unable to find {t} in the {src}."
                for im, (t, _), (src, _) in itertools.product(["I'm", "We're"], TOPICS, SOURCES)
            ],
            8,
        )
    )
    fam.append(
        (
            "knower-has-no-data",
            [
                f"{lead} {i} {a} {t}."
                for lead, i, a, (t, _) in itertools.product(
                    [
                        "I don't have any",
                        "I do not have any",
                        "I have no",
                        "We don't have any",
                        "We have no",
                        "I've got no",
                        "I'm afraid I have no",
                    ],
                    INFO,
                    ABOUT,
                    TOPICS,
                )
            ],
            8,
        )
    )
    fam.append(
        (
            "no-information-is-given",
            [
                f"No {i} {a} {t} {_be(i == 'details')} {given} in the {src}."
                for i, a, (t, _), given, (src, _) in itertools.product(
                    INFO, ABOUT, TOPICS, ["given", "provided", "included"], SOURCES
                )
            ]
            + [
                f"No {i} {a} {t} {_be(i == 'details')} given."
                for i, a, (t, _) in itertools.product(["information", "details"], ABOUT, TOPICS)
            ],
            8,
        )
    )
    fam.append(
        (
            "no-figure",
            [
                f"The {src} {_verb('give', pl)} no figure for {f}."
                for (src, pl), f in itertools.product(SOURCES, FIGURES)
            ]
            + [
                f"The {src} {_do_not(pl, c)} state {f}."
                for (src, pl), c, f in itertools.product(SOURCES, yes_no, FIGURES)
            ]
            + [
                f"No figure for {f} appears in the {src}."
                for (src, _), f in itertools.product(SOURCES, FIGURES)
            ],
            8,
        )
    )
    fam.append(
        (
            "source-does-not-include",
            [
                f"The {src} {_do_not(pl, c)} include {x}{t}."
                for (src, pl), c, x, (t, _) in itertools.product(
                    SOURCES, yes_no, ["", "any information on ", "anything about "], TOPICS
                )
            ],
            7,
        )
    )
    fam.append(
        (
            "not-covered-in-material-i-was-given",
            [
                f"{_cap(t)} {_be(tp)}n't covered in the {src} I was given."
                for (t, tp), src in itertools.product(TOPICS, BARE_SOURCES)
            ]
            + [
                f"That {thing} {isnt} covered in the {src} I was given."
                for thing, isnt, src in itertools.product(
                    ["detail", "point", "question"], ["is not", "isn't"], BARE_SOURCES
                )
            ],
            6,
        )
    )
    fam.append(
        (
            "cannot-answer-from-sources",
            [f"Unable to answer based on the {src}." for src, _ in SOURCES]
            + [
                f"{who} {cannot} answer {this} from the {src}."
                for who, cannot, this, (src, _) in itertools.product(
                    ME, ["cannot", "can't"], ["this", "that question"], SOURCES
                )
            ]
            + [
                f"The {src} {_do_not(pl, c)} contain enough information to answer {this}."
                for (src, pl), c, this in itertools.product(
                    SOURCES, yes_no, ["this", "the question"]
                )
            ]
            + [
                f"There {isnt} enough information in the {src} to say {q}."
                for isnt, (src, _), q in itertools.product(["is not", "isn't"], SOURCES, QUESTIONS)
            ],
            9,
        )
    )
    fam.append(
        (
            "knower-unsure-sources-silent",
            [
                f"{unsure} {q}; the {src} {_do_not(pl, c)} say."
                for unsure, q, (src, pl), c in itertools.product(
                    ["I'm not sure", "I don't know", "I can't say", "We don't know"],
                    QUESTIONS,
                    SOURCES,
                    yes_no,
                )
            ]
            + [
                f"I'm unable to determine {q} from the {src}."
                for q, (src, _) in itertools.product(QUESTIONS, SOURCES)
            ],
            8,
        )
    )
    fam.append(
        (
            "none-of-the-sources",
            [
                f"None of the {src} {v} {t}."
                for src, v, (t, _) in itertools.product(
                    PLURAL_SOURCES, ["mention", "cover", "describe", "discuss", "list"], TOPICS
                )
            ]
            + [
                f"None of the {src} {v} {q}."
                for src, v, q in itertools.product(
                    PLURAL_SOURCES, ["say", "indicate", "specify"], QUESTIONS
                )
            ],
            7,
        )
    )
    fam.append(
        (
            "source-says-nothing-about",
            [
                f"The {src} {_do_not(pl, c)} say anything about {t}."
                for (src, pl), c, (t, _) in itertools.product(SOURCES, yes_no, TOPICS)
            ]
            + [
                f"The {src} {_verb('make', pl)} no reference to {t}."
                for (src, pl), (t, _) in itertools.product(SOURCES, TOPICS)
            ]
            + [
                f"The {src} {_verb('say', pl)} nothing about {t}."
                for (src, pl), (t, _) in itertools.product(SOURCES, TOPICS)
            ],
            8,
        )
    )
    return fam


# --------------------------------------------------------------------------------------------
# Slots for facts
# --------------------------------------------------------------------------------------------

# Organisations, products and people that do not do something: (subject, plural?, verb phrases)
ORG_NEG: list[tuple[str, bool, list[str]]] = [
    (
        "The gym",
        False,
        [
            "offer towels to members",
            "charge a joining fee in January",
            "admit guests under 16",
            "open on public holidays",
        ],
    ),
    (
        "The ferry company",
        False,
        ["sell tickets on board", "carry bicycles in winter", "refund unused tickets"],
    ),
    (
        "The hotel",
        False,
        [
            "list its prices online",
            "allow pets in the rooms",
            "charge for parking",
            "serve breakfast after 10 a.m.",
        ],
    ),
    (
        "The budgeting app",
        False,
        [
            "share any information with advertisers",
            "work without an internet connection",
            "store card numbers on the phone",
            "collect location data",
        ],
    ),
    (
        "The doorbell camera",
        False,
        ["store any data in the cloud", "record sound", "work with routers older than 2015"],
    ),
    ("The router firmware", False, ["support 5 GHz networks", "update itself automatically"]),
    (
        "The bank",
        False,
        [
            "charge for replacement cards",
            "give information about accounts over the phone",
            "open its branches on Sundays",
        ],
    ),
    (
        "The clinic",
        False,
        [
            "accept walk-in patients",
            "offer appointments after 6 p.m. on Fridays",
            "keep paper records",
        ],
    ),
    (
        "The library",
        False,
        ["lend laptops", "charge late fees on children's books", "provide printing at weekends"],
    ),
    (
        "The evening course",
        False,
        ["require any prior experience", "include a final exam", "run during the school holidays"],
    ),
    ("The basic mobile plan", False, ["include international calls", "cover roaming in Asia"]),
    ("The home insurance", False, ["cover damage from old pipes", "pay for temporary housing"]),
    (
        "The airline",
        False,
        [
            "serve meals on short flights",
            "allow more than one cabin bag",
            "fly to the islands in winter",
        ],
    ),
    (
        "The company",
        False,
        [
            "give details of salaries to recruiters",
            "pay for relocation",
            "reimburse home internet costs",
        ],
    ),
    ("The landlord", False, ["allow subletting", "provide furniture"]),
    ("The transit authority", False, ["run trams after midnight", "sell paper tickets"]),
    ("The school", False, ["mention pupils' names in its newsletter", "record lessons"]),
    (
        "We",
        True,
        [
            "charge for returns",
            "ship to PO boxes",
            "sell gift cards",
            "mention client names in case studies",
        ],
    ),
    ("Bus drivers", True, ["accept cash", "sell day passes"]),
    ("Tutors", True, ["mark homework at weekends"]),
    ("Pharmacists", True, ["need a doctor's note to sell cough syrup"]),
]

# Passive negatives: (subject, plural?, participle + complement)
PASSIVE_NEG: list[tuple[str, bool, str]] = [
    ("Water damage", False, "covered by the home insurance"),
    ("Customer details", True, "provided to third parties"),
    ("The data", False, "stored outside the EU"),
    ("Refunds", True, "available for sale items"),
    ("Text messages", True, "included in the basic plan"),
    ("The source code", False, "available to customers"),
    ("Opened cosmetics", True, "accepted for return"),
    ("Dogs", True, "allowed on the upper deck"),
    ("Children under 12", True, "admitted without an adult"),
    ("Exam results", True, "given out by phone"),
    ("Parking", False, "included in the room rate"),
    ("Late essays", True, "marked"),
    ("Travel costs", True, "reimbursed for interviews"),
    ("Personal calls", True, "permitted during shifts"),
    ("The business lounge", False, "open to economy passengers"),
    ("The tap water on the ferry", False, "safe to drink"),
    ("Student loans", True, "offered to part-time students"),
    ("Seats", True, "reserved on the night bus"),
    ("Medical records", True, "shared with employers"),
    ("Change", False, "given on the buses"),
    ("Breakfast", False, "included in the hostel price"),
    ("Cosmetic scratches", True, "covered by the repair plan"),
    ("The swimming pool", False, "heated in winter"),
    ("Credit card payments", True, "accepted at the market stalls"),
    ("Phone numbers of members", True, "listed in the club directory"),
]

THERE_IS_NO: list[str] = [
    "fee for early cancellation",
    "charge for replacing a library card",
    "age limit for the evening classes",
    "parking at the clinic",
    "lift in the east building",
    "waiting period for dental cover",
    "minimum balance on the savings account",
    "direct train from the airport to the harbour",
    "Wi-Fi on the night buses",
    "dress code in the staff canteen",
    "deposit for hiring a locker",
    "limit on the number of renewals",
    "interest on the current account",
    "cash machine at the ferry terminal",
]

NO_X_IS: list[str] = [
    "No personal information is collected from children.",
    "No information is shared with partners unless you opt in.",
    "No data is sold to advertisers.",
    "No details of your account are given out over the phone.",
    "No cash is accepted on board.",
    "No refunds are given after 30 days.",
    "No pets are allowed in the dining room.",
    "No documents are needed to open a basic account.",
    "No receipt is given for donations under 5 euros.",
    "No records are kept after the course ends.",
    "No food is served on flights under two hours.",
    "No interest is charged if the card is paid off each month.",
    "No appointments are available on Sundays.",
    "No bonus is paid in the first year of employment.",
]

USER_CANNOT: list[str] = [
    "return opened software",
    "pause a subscription",
    "book a table for more than eight people online",
    "change the name on a plane ticket",
    "transfer a season pass to another person",
    "pay a parking fine in cash",
    "borrow more than 12 books at once",
    "enrol after the second week of term",
    "withdraw more than 500 euros a day from the cash machine",
    "bring a bicycle on the tram at rush hour",
    "cancel a booking less than 24 hours in advance",
    "upgrade the free plan to more than three users",
]
USER_CANNOT_LEADS = [
    "You cannot",
    "You can't",
    "It is not possible to",
    "Customers cannot",
    "It's not possible to",
    "Members can't",
]

PROHIBITED: list[str] = [
    "share passwords",
    "bring food into the reading room",
    "smoke anywhere on the campus",
    "park in the ambulance bay",
    "take photographs in the galleries",
    "use a mobile phone in the exam hall",
    "swim in the lake after dark",
    "enter the plant room without a permit",
]
PROHIBITED_LEADS = ["Nobody is allowed to", "No one may", "Staff must not", "Visitors may not"]

ELIGIBILITY: list[tuple[str, str]] = [
    ("Employees", "the bonus in their first year"),
    ("Part-time staff", "the company car scheme"),
    ("Contractors", "the pension plan"),
    ("Interns", "the relocation allowance"),
    ("New members", "the loyalty discount"),
    ("Students over 26", "the reduced tram fare"),
    ("Passengers on discounted fares", "lounge access"),
    ("Customers with overdue payments", "a credit increase"),
    ("Residents of other towns", "a free library card"),
    ("Applicants without a degree", "the graduate scheme"),
]

NOUN_NO: list[str] = [
    "The course awards no certificate.",
    "The doorbell camera stores no data in the cloud.",
    "The savings account pays no interest in its first month.",
    "The museum charges no entry fee on Sundays.",
    "The hostel offers no breakfast.",
    "The ferry sells no hot food.",
    "The night bus makes no stops between the depot and the station.",
    "The clinic sends no reminders by post.",
    "The basic plan includes no text messages.",
    "The library issues no fines for children's books.",
    "Our app shows no adverts.",
    "The landlord gives no discount for paying a year in advance.",
]

THING_CANNOT: list[str] = [
    "The patio heater cannot be used indoors.",
    "The power bank can't be taken in checked luggage.",
    "Gift cards cannot be exchanged for cash.",
    "Bicycles can't be left overnight at the station.",
    "The rowing machine cannot be folded.",
    "Season passes cannot be refunded after the first match.",
    "The blender jug can't be put in the dishwasher.",
    "Vouchers cannot be combined with other offers.",
    "The meeting rooms cannot be booked for more than four hours.",
    "Library laptops can't leave the building.",
]

NEVER: list[str] = [
    "The shuttle never runs on Sundays.",
    "Bank staff never ask for your PIN.",
    "The pool is never closed for more than a week.",
    "The bakery never sells day-old bread.",
    "Our couriers never leave parcels with neighbours.",
    "The tutors never give marks over the phone.",
    "The museum never lends its paintings abroad.",
    "Card details are never stored on our servers.",
]

NEG_WORLD_WORDS: list[str] = [
    "You will not find a cash machine at the station.",
    "Staff must not mention client names on social media.",
    "The hotel does not publish its room rates.",
    "Cyclists are not required to carry identity documents.",
    "The data from the app is not used for advertising.",
    "Information about other patients is never given to visitors.",
    "The delivery date does not need to be specified in advance.",
    "Calls to the helpline are not recorded.",
    "The town's water source is not shared with the neighbouring village.",
    "Text alerts are not available on the prepaid plan.",
    "Applicants do not have to provide a reference.",
    "Tenants will not find a parking space in the courtyard.",
]

# Affirmative facts
POSITIVE: list[str] = [
    "The Elm Road library opens at 9 a.m. on Saturdays.",
    "Dr. Okafor sees patients at the Hillside clinic on Tuesdays and Thursdays.",
    "The spring course starts on 3 March and lasts ten weeks.",
    "Members who pay annually receive a 10% discount.",
    "The ferry to Marrow Island leaves every 40 minutes in summer.",
    "The overdraft interest rate is 12.9% a year.",
    "New hires have a probation period of six months.",
    "The dishwasher uses 9.5 litres of water per cycle.",
    "Checked bags on regional flights may weigh up to 23 kg.",
    "The museum's group rate applies to groups of 15 or more.",
    "Night buses run every 30 minutes between midnight and 5 a.m.",
    "The cordless drill's battery lasts about 45 minutes under load.",
    "Loans of up to 20,000 euros can be repaid early without a penalty.",
    "Check-in at the Harbour View hotel starts at 3 p.m.",
    "The gym's annual membership costs 420 euros.",
    "Overtime requests are approved by the shift manager.",
    "Each evening class holds at most 18 students.",
    "Parents can book vaccination appointments online up to six weeks ahead.",
    "The photo editor needs 8 GB of memory and 4 GB of disk space.",
    "Late fees for adult books are 20 cents a day.",
    "Tram fares for students are half the standard fare.",
    "The outdoor pool reopens on 1 May.",
    "Staff who refer a new hire receive 500 euros after the hire's third month.",
    "If a train is more than an hour late, passengers get 25% of the fare back.",
    "Tenants must give two months' notice before moving out.",
    "Ms. Lindqvist manages the claims team at Northfield Insurance.",
    "The savings account pays 2.1% interest on balances above 1,000 euros.",
    "The kettle switches off automatically when the water boils.",
    "Visiting hours on the children's ward are 10 a.m. to 8 p.m.",
    "The grant is open to students from any country.",
]

POS_WORLD_WORDS: list[str] = [
    "The form must be given to HR within 10 days.",
    "Drivers must carry their documents at all times.",
    "Tenants can find the meter in the basement.",
    "Callers should mention their booking number.",
    "Guests must provide a photo ID at check-in.",
    "The clinic keeps patient records for ten years.",
    "Bank statements are available online after 24 hours.",
    "Delivery slots must be specified at checkout.",
    "The river is the main source of drinking water for the town.",
    "Each document sent to the court must be signed by two partners.",
    "The school sends a text reminder two days before each exam.",
    "Information about delays is shown on the platform screens.",
    "Members can find the class timetable on the noticeboard by the entrance.",
    "The data is backed up every night at 2 a.m.",
    "Every visit is recorded in the patient's file.",
    "Applicants must state their nationality on the form.",
    "Full board is covered by the tour price.",
    "Receipts are given for all donations over 5 euros.",
    "Contact details for the caretaker are listed in the lobby.",
    "The details of each booking are sent by email within an hour.",
]

PLACES = [
    "The Elm Road pharmacy",
    "The Northgate pool",
    "The harbour ticket office",
    "The Westbrook bank branch",
    "The city archive reading room",
]
TIMES = ["7 a.m.", "8:30 a.m.", "10 a.m.", "noon"]
DAYS = ["on weekdays", "on Saturdays", "on Sundays", "during the school holidays"]

# (item, plausible prices)
ITEMS: list[tuple[str, list[str]]] = [
    ("A day pass for the trams", ["4.50 euros", "6 euros"]),
    ("The beginners' pottery course", ["180 euros", "240 euros"]),
    ("A replacement bank card", ["5 euros", "10 euros"]),
    ("The museum audio guide", ["3 euros", "4.50 euros"]),
    ("A locker at the pool", ["12 euros a month", "2 euros a day"]),
    ("The advanced first-aid course", ["95 euros", "120 euros"]),
]

FORMS = [
    "The expense claim",
    "The change-of-address form",
    "The enrolment form",
    "The insurance claim form",
    "The overtime sheet",
]
RECIPIENTS = ["HR", "the finance office", "the registrar", "the claims team", "your manager"]
DEADLINES = ["5 working days", "10 days", "30 days", "the end of the month"]

DISCOUNT_GROUPS = [
    "Students",
    "Pensioners",
    "Members who pay by direct debit",
    "Families with three or more children",
    "Customers who book online",
]
DISCOUNTS = ["5%", "10%", "15%", "20%"]
DISCOUNT_ON = ["on tram passes", "on course fees", "on gym memberships", "on museum tickets"]


def _fact_families() -> list[tuple[str, list[str], int, bool]]:
    """(family name, candidate pool, how many to draw, negated?)."""
    fam: list[tuple[str, list[str], int, bool]] = []
    yes_no = [False, True]
    fam.append(
        (
            "org-does-not",
            [
                f"{subj} {_do_not(pl, c)} {vp}."
                for subj, pl, vps in ORG_NEG
                for vp, c in itertools.product(vps, yes_no)
            ],
            40,
            True,
        )
    )
    fam.append(
        (
            "passive-not",
            [
                f"{subj} {_be(pl)}{NOT[c]} {rest}."
                for (subj, pl, rest), c in itertools.product(PASSIVE_NEG, yes_no)
            ],
            22,
            True,
        )
    )
    fam.append(
        (
            "there-is-no",
            [
                f"{there} no {x}."
                for there, x in itertools.product(["There is", "There's"], THERE_IS_NO)
            ],
            11,
            True,
        )
    )
    fam.append(("no-x-is", list(NO_X_IS), 10, True))
    fam.append(
        (
            "cannot-action",
            [f"{lead} {vp}." for lead, vp in itertools.product(USER_CANNOT_LEADS, USER_CANNOT)],
            14,
            True,
        )
    )
    fam.append(
        (
            "prohibited",
            [f"{lead} {vp}." for lead, vp in itertools.product(PROHIBITED_LEADS, PROHIBITED)],
            8,
            True,
        )
    )
    fam.append(
        (
            "not-eligible",
            [
                f"{grp} {are} eligible for {what}."
                for (grp, what), are in itertools.product(ELIGIBILITY, ["are not", "aren't"])
            ],
            8,
            True,
        )
    )
    fam.append(("verb-no-noun", list(NOUN_NO), 9, True))
    fam.append(("thing-cannot", list(THING_CANNOT), 8, True))
    fam.append(("never", list(NEVER), 6, True))
    fam.append(("negated-world-words", list(NEG_WORLD_WORDS), 12, True))

    fam.append(("affirmative", list(POSITIVE), 26, False))
    fam.append(("affirmative-world-words", list(POS_WORLD_WORDS), 18, False))
    fam.append(
        (
            "opening-hours",
            [f"{p} opens at {t} {d}." for p, t, d in itertools.product(PLACES, TIMES, DAYS)],
            8,
            False,
        )
    )
    fam.append(
        (
            "price",
            [f"{item} costs {price}." for item, prices in ITEMS for price in prices],
            6,
            False,
        )
    )
    fam.append(
        (
            "deadline",
            [
                f"{f} must be sent to {r} within {d}."
                if d != "the end of the month"
                else f"{f} must reach {r} by the end of the month."
                for f, r, d in itertools.product(FORMS, RECIPIENTS, DEADLINES)
            ],
            6,
            False,
        )
    )
    fam.append(
        (
            "discount",
            [
                f"{g} get {d} off {o.removeprefix('on ')}."
                for g, d, o in itertools.product(DISCOUNT_GROUPS, DISCOUNTS, DISCOUNT_ON)
            ],
            6,
            False,
        )
    )
    return fam


# --------------------------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------------------------

_FORBIDDEN = (
    "kestrel",
    "t9",
    "aura",
    "energy+",
    "thermostat",
    "air quality monitor",
    "warranty extension",
    "trade-in",
    "on-call",
    "pto",
)


CURLY = "\u2019"  # typographic apostrophe


# Spelling variants that do not make a statement new: contractions and apostrophes.
_EXPAND = [
    ("can't", "cannot"),
    ("won't", "will not"),
    ("n't", " not"),
    ("it's", "it is"),
    ("there's", "there is"),
    ("i'm", "i am"),
    ("we're", "we are"),
    ("i've", "i have"),
]
# Words that read badly when repeated in one generated sentence ("provided in the provided text").
_NO_REPEAT = ("provid", "information", "given")


def _norm(text: str) -> str:
    """Key for uniqueness: the same statement up to apostrophes and contractions."""
    key = text.replace(CURLY, "'").casefold()
    for short, long in _EXPAND:
        key = key.replace(short, long)
    return key


def _awkward(text: str) -> bool:
    low = text.casefold()
    return any(low.count(stem) > 1 for stem in _NO_REPEAT)


def _draw(
    rng: random.Random,
    pool: Iterable[str],
    count: int,
    seen: set[str],
    emit: Callable[[str], None],
) -> None:
    candidates = sorted({text for text in pool if not _awkward(text)})
    rng.shuffle(candidates)
    taken = 0
    for text in candidates:
        if taken == count:
            break
        if "'" in text and rng.random() < 0.3:
            text = text.replace("'", CURLY)
        key = _norm(text)
        if key in seen:
            continue
        seen.add(key)
        emit(text)
        taken += 1
    if taken < count:
        raise ValueError(f"pool too small: wanted {count}, got {taken}")


def _appender(out: list[tuple[str, str, bool]], kind: str, negated: bool) -> Callable[[str], None]:
    def emit(text: str) -> None:
        out.append((text, kind, negated))

    return emit


def _labelled(seed: int) -> list[tuple[str, str, bool]]:
    """(text, kind, negated) triples; negated is only ever True for facts."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[tuple[str, str, bool]] = []
    for _name, pool, count in _abstention_families():
        _draw(rng, pool, count, seen, _appender(out, ABSTENTION, False))
    for _name, pool, count, negated in _fact_families():
        _draw(rng, pool, count, seen, _appender(out, FACT, negated))
    rng.shuffle(out)
    for text, _, _ in out:
        low = text.casefold()
        bad = [w for w in _FORBIDDEN if re.search(rf"(?<!\w){re.escape(w)}(?!\w)", low)]
        if bad:
            raise AssertionError(f"corpus name or topic in {text!r}: {bad}")
    return out


def statements(seed: int = 0) -> list[tuple[str, str]]:
    """(text, kind) pairs, kind being ABSTENTION or FACT; deterministic for a given seed."""
    return [(text, kind) for text, kind, _ in _labelled(seed)]


def negated_facts(seed: int = 0) -> list[str]:
    """The negated facts among ``statements(seed)``, in the same order."""
    return [text for text, kind, negated in _labelled(seed) if kind == FACT and negated]


if __name__ == "__main__":
    items = statements()
    n_abst = sum(kind == ABSTENTION for _, kind in items)
    n_fact = sum(kind == FACT for _, kind in items)
    n_neg = len(negated_facts())
    print(f"total: {len(items)}")
    print(f"{ABSTENTION}: {n_abst}")
    print(f"{FACT}: {n_fact} (negated: {n_neg}, affirmative: {n_fact - n_neg})")
    assert len({_norm(t) for t, _ in items}) == len(items), "duplicate statements"
    assert len(items) >= 300 and n_abst >= 120 and n_fact >= 120 and n_neg >= 90
