"""What a statement is about: the sources (an abstention) or the world (a fact). Pure.

An abstention is a statement about the sources or about the answerer's knowledge: "the
documents don't say X", "I couldn't find X", "no information about X is given", "it is unclear
from the passages whether X". It holds unless a chunk gives X. Everything else is a fact,
negated or not: "refunds are not available in the EU", "there is no fee for Y", "Z stores no
data in the cloud" say something about the world and are supported only when a chunk states
them. Error class handled: invented negative facts passing as abstentions (the earlier rule
matched a negation near words like "data", "information", "available" or "covered", whatever
the subject; on the hidden subtly-wrong answers 5 of 7 negation errors passed that way).

The decision reads who or what the statement is about, in five shapes:
  1. a source as the subject of a reporting verb: "the passages do not mention", "the
     provided text gives no figure", "neither document says", "nothing in the context states";
  2. the answerer as the subject of a verb of knowing or finding: "I couldn't find", "we can't
     confirm", "I don't have any details on", "unable to answer";
  3. information as the subject: "no information about X is given", "there is no mention of",
     "the exact figure is not provided";
  4. an impersonal judgement of what can be known: "it is unclear whether", "it is not possible
     to determine", "cannot be determined from";
  5. a reporting verb in the passive: "X is not mentioned / specified", "X is not covered in
     the documents" (a verb that also describes the world, such as covered, included, given or
     available, counts only with the sources named: "water damage is not covered" is a fact).
A source is a generic word for what the answerer was given (documents, passages, context,
excerpts, "the material I was given"), never a domain document (a policy, manual or contract
is also a rule about the world: "the policy does not cover pets" is a fact to check).
"""

from __future__ import annotations

import re

from auditor.claim_rows import ClaimKind

__all__ = ["claim_kind", "is_abstention"]

# "not", "n't" ("can't" is "ca" + "n't" after a "can"), "cannot", "never"
_NOT = r"(?:\s+not|n[\u2019']t|(?<=can)[\u2019']t|\s*cannot|\s+never)"
# what the answerer was given, named generically
_SOURCE_NOUN = (
    r"(?:documents?|docs|passages?|sources?|contexts?|texts?(?!\s+messages?)|excerpts?|"
    r"extracts?|snippets?|articles?(?!\s+\d)|search\s+results|retrieved\s+(?:chunks?|results?)|"
    r"chunks?|knowledge\s+base|references?|citations?|paragraphs?|sections?\s+provided)"
)
# words that name the sources only when qualified: "the provided information", "the data I
# was given" (bare, "information" or "records" may be the world's: "customer records")
_QUALIFIED_NOUN = r"(?:information|material|materials|data|records?|content|notes)"
_POST_QUALIFIER = (
    r"(?=\s+(?:provided|given|supplied|shared|available|retrieved|(?:that\s+)?(?:I|we)\s+"
    r"(?:have|had|was\s+given|were\s+given|received|can\s+see)|at\s+hand|here|above))"
)
# a determiner and source adjectives before a source noun ("the provided", "these two")
_SOURCE_DET = (
    r"(?:(?:the|these|those|this|that|my|our|your|its|their|such|any|all(?:\s+the)?|both|"
    r"either|neither(?:\s+of\s+the)?|none\s+of\s+the|no|each|every)\s+)"
)
_SOURCE_ADJ = (
    r"(?:(?:provided|given|supplied|retrieved|available|attached|above|following|shared|cited|"
    r"relevant|quoted|referenced|same|two|three|four|several|various|other|source|reference|"
    r"supporting|underlying|original|current|accompanying)\s+)"
)
_PRE_QUALIFIER = (
    r"(?:(?:provided|given|supplied|retrieved|available|attached|above|shared|cited|quoted|"
    r"referenced|supporting|accompanying|source|reference|background)\s+)"
)
_SOURCE = (
    rf"(?:{_SOURCE_DET}?{_SOURCE_ADJ}*{_PRE_QUALIFIER}{_SOURCE_ADJ}*{_QUALIFIED_NOUN}"
    rf"|{_SOURCE_DET}?{_SOURCE_ADJ}*{_QUALIFIED_NOUN}{_POST_QUALIFIER}"
    rf"|{_SOURCE_DET}{_SOURCE_ADJ}*{_SOURCE_NOUN}|{_SOURCE_ADJ}+{_SOURCE_NOUN}"
    rf"|(?:passages?|documents?|sources?|excerpts?|articles?)\s+\d+|\bthem\b(?=\s*[.,;!?]|$))"
)
# what a source does to information
_REPORT = (
    r"(?:say|state|mention|specify|provide|contain|include|give|cover|address|list|indicate|"
    r"tell|explain|describe|discuss|detail|clarify|show|offer|answer|reveal|name|identify|"
    r"define|report|note|confirm|spell\s+out|go\s+into|touch\s+on|talk\s+about|refer\s+to|"
    r"deal\s+with|establish|quote|cite|break\s+down|elaborate\s+on|make\s+clear|have|suggest|"
    r"outline|present|specify|record|document|include)"
)
_REPORT_3RD = (
    r"(?:says|states|mentions|specifies|provides|contains|includes|gives|covers|addresses|"
    r"lists|indicates|tells|explains|describes|discusses|details|clarifies|shows|offers|"
    r"answers|reveals|names|identifies|defines|reports|notes|confirms|spells\s+out|goes\s+into|"
    r"touches\s+on|talks\s+about|refers\s+to|deals\s+with|establishes|quotes|cites|has|"
    r"suggests|outlines|presents|records|documents|say|state|mention|specify|provide|contain|"
    r"include|give|cover|address|list|indicate|tell|explain|describe|discuss|detail|clarify|"
    r"show|offer|reveal|name|define|report|note|confirm|has|have|outline|present|said|stated|"
    r"mentioned|specified|provided|contained|included|gave|covered|listed|indicated|told|"
    r"explained|described|discussed|detailed|clarified|showed|offered|revealed|reported|noted)"
)
# words that qualify a source without ending the subject: "the documents I was given also"
_QUALIFIER = (
    r"(?:\s+(?:(?:that|which)\s+)?(?:I|we|you)\s+(?:have|had|was\s+given|were\s+given|"
    r"received|shared|provided|can\s+see|found|read|checked|looked\s+at)"
    r"|\s+(?:provided|given|supplied|shared|available|retrieved|above|here|at\s+hand)"
    r"(?:\s+to\s+(?:me|us))?)?"
    r"(?:\s*\(?\s*\d+(?:\s*(?:,|and|&)\s*\d+)*\s*\)?)?"
    r"(?:\s+(?:also|only|simply|even|actually|themselves|itself|just|really|clearly|still))*"
)
_KNOWER = r"(?:\bI|\bwe)"
_KNOW = (
    r"(?:find|locate|see|spot|know|tell|determine|confirm|verify|say|answer|identify|work\s+out|"
    r"figure\s+out|establish|pin\s+down|be\s+(?:sure|certain)|ascertain|infer|access|quote|"
    r"cite|give\s+(?:you\s+)?an?\s+answer|speak\s+to|comment\s+on|answer\s+that|deduce|"
    r"point\s+to|see\s+anything|find\s+anything|found|seen|located|spotted|known|determined|"
    r"confirmed|identified|verified|established)"
)
# what information comes in: "I don't have any figure", "I cannot give exact details"
_INFO_NOUN = (
    r"(?:information|info|details?|data|figures?|numbers?|answer|specifics|specific\s+\w+|"
    r"statistics|stats|facts?|date|dates|price|prices|cost|amount|estimate|confirmation|"
    r"evidence|record\s+of|mention|indication|reference|breakdown|explanation|word|knowledge|"
    r"insight|clue|source|way\s+(?:to|of)\s+(?:know|tell|determine|confirm|verify|check))"
)
_INFO_ADJ = (
    r"(?:(?:a|an|any|the|specific|exact|precise|detailed|relevant|further|additional|more|"
    r"clear|direct|enough|sufficient|concrete|explicit|reliable|current|up-to-date|official|"
    r"definitive|definite|firm|actual|particular|such|that|this|other|real|good|solid|"
    r"much|hard|[\w-]+(?=\s+(?:figure|number|date|price|estimate|data|details?)\b))\s+)"
)
# verbs of reporting that describe texts, not the world ("recorded", "indicated" or "named"
# also do: "calls are not recorded", "surgery is not indicated")
_PASSIVE_REPORT = (
    r"(?:mentioned|stated|specified|described|discussed|addressed|detailed|explained|clarified|"
    r"elaborated|spelled\s+out|spelt\s+out|referred\s+to|touched\s+on)"
)
_PASSIVE_WORLD = (
    r"(?:given|provided|covered|included|listed|shown|found|available|present|offered|"
    r"contained|there|set\s+out|laid\s+out|written|defined)"
)
_BE = r"(?:is|are|was|were|am|be|been|'s|\u2019s|'re|\u2019re)"
_IN_SOURCE = (
    rf"(?:in|within|from|by|across|among|anywhere\s+in|based\s+on|according\s+to)\s+{_SOURCE}"
)

_SHAPES = [
    # 1. a source as subject: "the passages do not mention", "passage 2 gives no figure"
    rf"{_SOURCE}{_QUALIFIER}\s+(?:do|does|did|can|could|would|will)?{_NOT}\s+"
    rf"(?:(?:appear\s+to|seem\s+to|actually|explicitly|directly|clearly|specifically|really|"
    rf"even|fully)\s+)*{_REPORT}\b",
    rf"{_SOURCE}{_QUALIFIER}\s+{_REPORT_3RD}\s+(?:no|nothing|none|not)\b",
    rf"{_SOURCE}{_QUALIFIER}\s+(?:{_BE}|seem|seems|remain|remains)\s+(?:entirely\s+|completely\s+)?"
    r"(?:silent|unclear|vague|inconclusive|ambiguous)\b",
    rf"{_SOURCE}{_QUALIFIER}\s+(?:lack|lacks|omit|omits|leave\s+out|leaves\s+out|"
    r"make\s+no|makes\s+no|made\s+no)\b",
    rf"{_SOURCE}{_QUALIFIER}\s+(?:only|just|mainly|mostly)\s+{_REPORT_3RD}\b",
    rf"\b(?:neither|none|no)\s+(?:of\s+(?:the\s+|these\s+|those\s+)?)?{_SOURCE_ADJ}*"
    rf"(?:{_SOURCE_NOUN}|{_QUALIFIED_NOUN}{_POST_QUALIFIER}){_QUALIFIER}\s+(?:{_REPORT_3RD}|(?:do|does|did|can|could)\s+"
    rf"{_REPORT})\b",
    # "the material does not state": a bare "material" names the sources with a verb only
    # texts do (not with "include" or "contain": "the material does not contain latex")
    rf"\b(?:the|this|that|my|our)\s+materials?{_QUALIFIER}\s+(?:(?:do|does|did){_NOT}\s+"
    r"(?:say|state|mention|specify|describe|explain|discuss|indicate|detail|clarify|address|"
    r"cover|make\s+clear|go\s+into|talk\s+about|touch\s+on)|(?:says|offers|gives|provides)"
    r"\s+(?:no|nothing)|is\s+silent)\b",
    rf"\b(?:no|nothing)\b[^.!?;]{{0,80}}?\b(?:appears?|shows\s+up|comes\s+up|{_BE}\s+"
    rf"(?:given|found|mentioned|stated|listed|specified|included|provided))\s+(?:anywhere\s+)?"
    rf"(?:in|within)\s+(?:{_SOURCE}|the\s+materials?\b)",
    # the material as a text: "the material includes no details on", "not listed in the material"
    rf"\b(?:the|this|that|my|our)\s+materials?{_QUALIFIER}\s+(?:(?:do|does|did){_NOT}\s+"
    rf"(?:include|contain|have|list|give|provide)\s+(?:anything\s+(?:about|on)|{_INFO_ADJ}*"
    rf"{_INFO_NOUN})|(?:includes|contains|has|lists)\s+(?:no|nothing)\s+(?:about|on|"
    rf"{_INFO_ADJ}*{_INFO_NOUN}))\b",
    rf"(?:{_BE}{_NOT}|\b(?:isn|aren|wasn|weren)[\u2019']t)\s+(?:{_PASSIVE_REPORT}|listed|"
    r"covered|given|mentioned)\s+(?:anywhere\s+)?(?:in|within)\s+the\s+materials?\b",
    rf"\bnothing\s+(?:in|within|from|across)\s+(?:{_SOURCE}|the\s+materials?\b)",
    # a pronoun standing for a source, with a verb only texts and people do: "it does not
    # explain how ..."; "provide" and "give" only with an information noun about something
    # ("it does not provide instructions on ..."), not given to someone ("... to advertisers")
    rf"\b(?:it|they|this|these|which|that|he|she)\s+(?:do|does|did){_NOT}\s+"
    r"(?:(?:actually|explicitly|directly|clearly|specifically|really)\s+)?"
    r"(?:say|state|mention|specify|explain|describe|discuss|detail|clarify|elaborate|"
    r"spell\s+out|go\s+into|touch\s+on|talk\s+about|address)\b",
    rf"\b(?:it|they|this|these|which)\s+(?:do|does|did){_NOT}\s+(?:provide|give|include|"
    rf"contain|offer)\s+{_INFO_ADJ}*(?:information|info|details|instructions|explanation|"
    r"guidance|specifics|answer|description)(?=\s*(?:[.,;!?]|$|\s+(?:on|about|regarding|as\s+"
    r"to|of|how|what|when|where|why|whether|that)\b))",
    rf"\b(?:difficult|hard|impossible|not\s+possible)\s+to\s+(?:determine|tell|say|know|"
    rf"establish|confirm|infer|work\s+out|figure\s+out)\b[^.!?;]{{0,60}}?{_IN_SOURCE}",
    rf"\b(?:beyond|outside)\s+(?:the\s+scope\s+of|what)\s+{_SOURCE}",
    rf"{_BE}{_NOT}\s+(?:{_PASSIVE_REPORT}|{_PASSIVE_WORLD})\s+(?:\w+\s+){{0,2}}?{_IN_SOURCE}",
    rf"(?:^|[,;:]\s*|\b(?:but|and|although|though|however)\s+)not\s+(?:{_PASSIVE_REPORT}|"
    rf"{_PASSIVE_WORLD})\s+(?:\w+\s+){{0,2}}?{_IN_SOURCE}",
    rf"\b(?:isn|aren|wasn|weren)[\u2019']t\s+(?:{_PASSIVE_REPORT}|{_PASSIVE_WORLD})\s+"
    rf"(?:\w+\s+){{0,2}}?{_IN_SOURCE}",
    rf"{_BE}{_NOT}\s+(?:(?:anywhere|stated|mentioned|given|found|included)\s+)?in\s+{_SOURCE}",
    rf"\b(?:isn|aren|wasn|weren)[\u2019']t\s+(?:anywhere\s+)?in\s+{_SOURCE}",
    # 2. the answerer: "I couldn't find", "we can't confirm", "I don't have any details"
    rf"{_KNOWER}(?:\s+(?:also|still|just|really|honestly|unfortunately))?"
    rf"(?:\s+(?:do|did|can|could|would|am|was|were|have|had|will)|[\u2019'](?:m|ve|re))?"
    rf"{_NOT}\s+(?:(?:be|been)\s+(?:able|possible)\s+to\s+|able\s+to\s+)?(?:(?:really|actually|quite|fully|"
    rf"exactly|definitively|reliably)\s+)?{_KNOW}\b",
    rf"{_KNOWER}(?:\s+(?:am|are|was|were|have\s+been|had\s+been)|[\u2019'](?:m|re)|"
    rf"[\u2019']ve\s+been)"
    rf"\s+(?:unable|not\s+able|not\s+sure|not\s+certain|uncertain|unsure|not\s+in\s+a\s+"
    rf"position)\b",
    rf"{_KNOWER}(?:\s+(?:do|did|can|could)){_NOT}\s+(?:have|see|find|get|give|provide|share|"
    rf"offer|supply|quote|state|specify|report|list)\s+(?:you\s+)?{_INFO_ADJ}*{_INFO_NOUN}\b",
    rf"{_KNOWER}(?:\s+(?:have|had)|[\u2019']ve|[\u2019']d)\s+(?:got\s+)?no\s+{_INFO_ADJ}*"
    rf"{_INFO_NOUN}\b",
    rf"{_KNOWER}\s+(?:found|saw|see|find|can\s+find|could\s+find|have\s+found|located)\s+"
    r"(?:no|nothing)\b",
    r"(?:^|[.!?;:]\s*|\b(?:but|so|and|however|unfortunately|sorry)\W*\s*)(?:I'm\s+|I\s+am\s+)?"
    rf"(?:unable|not\s+able|cannot|can't|can\u2019t|can\s+not)\s+to?\s*{_KNOW}\b",
    # 3. information as the subject
    rf"\bthere(?:\s+(?:is|are|was|were|seems\s+to\s+be|appears\s+to\s+be)|[\u2019']s)\s+(?:no|"
    rf"nothing|not\s+(?:any|enough))\s+{_INFO_ADJ}*(?:{_INFO_NOUN}|mention|reference)\s+"
    rf"(?:about|on|of|regarding|concerning|as\s+to|for|to\s+(?:say|indicate|show|suggest)|"
    rf"that|in|(?:given|provided|available|included|here|there)\b)",
    r"\bthere(?:\s+(?:is|are|was|were)|[\u2019']s)\s+nothing\s+(?:about|on|regarding|to\s+"
    r"(?:say|indicate|suggest|show))\b",
    r"\b(?:no|nothing|any)\s+(?:specific\s+|explicit\s+|direct\s+)?mention\b",
    r"\bmakes?\s+no\s+mention\b",
    rf"(?:^|[,;:]\s*|\b(?:but|and|so|however)\s+)(?:no|nothing)\s+{_INFO_ADJ}*{_INFO_NOUN}?"
    rf"\s*(?:(?:about|on|of|regarding|concerning|as\s+to|for)\s+[^.!?;]{{0,80}}?)?"
    rf"{_BE}\s+(?:(?:explicitly|clearly|directly|actually|specifically)\s+)?"
    rf"(?:{_PASSIVE_REPORT}|given|provided|available|included|offered|found|there|known|"
    rf"listed|shown|present)(?=\s*(?:[.!?;,)]|$|\s+(?:in|within|from|by|anywhere|here|there|"
    rf"about|on|regarding|for|as\s+to|either)\b))",
    rf"(?:^|[,;:]\s*|\b(?:but|and|so|however)\s+)(?:the\s+|any\s+|such\s+|this\s+|that\s+)?"
    rf"{_INFO_ADJ}*(?:information|info|details?|specifics|figures?|numbers?|answer|data|"
    rf"statistics|date|price|cost|amount|breakdown|explanation|reason|name)\b[^.!?;]{{0,80}}?"
    rf"{_BE}{_NOT}\s+(?:(?:explicitly|clearly|directly|actually|specifically)\s+)?"
    rf"(?:{_PASSIVE_REPORT}|given|provided|available|included|listed|shown|present|known|"
    rf"there|found)(?=\s*(?:[.!?;,)]|$|\s+(?:in|within|from|by|anywhere|here|there|either)\b))",
    # 4. an impersonal judgement of what can be known
    r"\b(?:it\s+(?:is|was|remains|seems|appears)|it[\u2019']s|that[\u2019']s|that\s+is|"
    r"this\s+is)\s+(?:still\s+|therefore\s+|thus\s+|also\s+)?(?:not\s+(?:possible|clear|known|"
    r"certain|evident|obvious|stated|specified|mentioned)|impossible|unclear|uncertain|unknown|"
    r"hard|difficult|unspecified|not\s+something\s+(?:I|we)\s+can)\b"
    r"(?!\s+(?:to|for)\s+(?!(?:determine|tell|say|know|answer|confirm|establish|verify|infer|"
    r"work\s+out|figure\s+out|judge|assess|ascertain|be\s+sure|conclude|deduce|identify|find)\b))",
    r"\b(?:cannot|can\s*not|can't|can\u2019t|could\s*not|couldn't|couldn\u2019t)\s+be\s+"
    r"(?:determined|answered|confirmed|verified|established|inferred|deduced|concluded|"
    r"ascertained|told|known|said|stated|assessed|judged|identified|worked\s+out|"
    r"figured\s+out|made\s+out|gleaned|derived)\b",
    r"\bit\s+(?:isn|wasn)[\u2019']t\s+(?:clear|possible|known|certain|evident|obvious)\b"
    r"(?!\s+(?:to|for)\s+(?!(?:determine|tell|say|know|answer|confirm|establish|verify|"
    r"infer|work\s+out|figure\s+out|judge|assess|ascertain|be\s+sure|conclude|deduce|"
    r"identify|find)\b))",
    r"\bno\s+way\s+(?:to|of)\s+(?:know|knowing|tell|telling|determine|determining|say|"
    r"saying|confirm|confirming|verify|verifying|work\s+out|working\s+out|be\s+sure)\b",
    r"\b(?:isn|wasn|aren|weren)[\u2019']t\s+(?:enough|sufficient)\s+(?:information|info|"
    r"details|data|context|evidence)\b",
    r"\b(?:unclear|uncertain|not\s+clear|not\s+known|unknown)\s+(?:from|based\s+on|"
    rf"according\s+to|given)\s+{_SOURCE}",
    rf"\b(?:based\s+on|from|according\s+to|given|with)\s+{_SOURCE}[^.!?;]{{0,30}}?,?\s+"
    r"(?:it\s+(?:is|'s)\s+)?(?:unclear|uncertain|not\s+clear|impossible|not\s+possible)\b",
    r"\b(?:insufficient|not\s+enough|no\s+sufficient|inadequate)\s+(?:information|info|"
    r"details|data|context|evidence)\b",
    # 5. a reporting verb in the passive: "the date is not specified"
    rf"{_BE}{_NOT}\s+(?:(?:explicitly|clearly|directly|actually|specifically|anywhere|"
    rf"further|precisely)\s+)?{_PASSIVE_REPORT}\b(?!\s+(?:as|to\s+be|that)\b)",
    rf"\b(?:isn|aren|wasn|weren)[\u2019']t\s+(?:(?:explicitly|clearly|directly|actually|"
    rf"specifically|anywhere)\s+)?{_PASSIVE_REPORT}\b(?!\s+(?:as|to\s+be|that)\b)",
    rf"(?:^|[,;:(]\s*)not\s+(?:(?:explicitly|clearly|directly)\s+)?{_PASSIVE_REPORT}\b",
]
_ABSTENTION = re.compile("|".join(f"(?:{shape})" for shape in _SHAPES), re.IGNORECASE)


def is_abstention(statement: str) -> bool:
    """Whether the statement is about the sources or the answerer's knowledge lacking
    something (see the module docstring), not about the world."""
    return bool(_ABSTENTION.search(statement))


def claim_kind(claim: str) -> ClaimKind:
    """ "abstention" when the claim says the sources (or the answerer) lack something, else
    "fact"."""
    return "abstention" if is_abstention(claim) else "fact"
