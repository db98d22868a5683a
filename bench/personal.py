"""Personal vaults of issue 32: short everyday questions over facts a user keeps, and questions
about topics the vault does not have (which should return nothing).

Two sets, written before any change was measured on them (the test set of the read path's
behaviour in a personal vault; bench/locomo.py reports them beside issue 15's small vault, and
tests/test_retrieval_quality.py pins them):

- ISSUE: the 20-fact vault of issue 32's report (its four short questions that missed), and its
  coffee/tea vault (five phrasings of one preference and one other).
- HOUSEHOLD: 50 facts of one person's life, written as memvault learns and users add them ("The
  user ...", a few in the first person, one preference said three ways), 38 everyday questions
  with the facts that answer them, and 20 questions on topics it does not hold.

Each answerable question names the facts that answer it (their numbers in the list): it counts as
answered when one of them is among the first K results.
"""

from __future__ import annotations

from pathlib import Path

K = 3  # "right in the top 3" (issue 32)

ISSUE_FACTS = [
    "The user drives a Toyota Corolla", "The car insurance renews every October", "The user's wife is named Anne",
    "The user has a cat called Miso", "The user lives in Lisbon", "The user works as a nurse at the city hospital",
    "The user plays the guitar and goes bouldering on weekends", "The user likes black coffee",
    "The user is allergic to peanuts", "The user's daughter is called Lily", "The user's son is named Tom",
    "The user's mother lives in Porto", "The user is learning German", "The user runs a 10k every Sunday",
    "The user's birthday is on 3 March", "The user's favourite film is Spirited Away", "The user is vegetarian",
    "The user's best friend is called Paulo", "The user's flat has two bedrooms",
    "The user prefers aisle seats on planes",
]
ISSUE_PRESENT = [
    ("what car do I have", {0}), ("what's the name of our pet", {3}), ("What do I do for a living?", {5}),
    ("What are my hobbies?", {6}),
]

COFFEE_FACTS = [
    "The user likes black coffee", "The user likes coffee a lot", "The user loves drinking coffee",
    "The user drinks coffee every morning", "The user enjoys coffee", "The user likes green tea",
]
COFFEE_QUESTION = "What does the user like to drink?"

HOUSEHOLD_FACTS = [
    "The user works as a high school chemistry teacher",                    # 0
    "The user teaches at Riverside High School",                            # 1
    "The user lives in Leeds with his partner Sam",                         # 2
    "Sam is a graphic designer who works from home",                        # 3
    "The user has two kids, Maya who is 9 and Leo who is 6",                # 4
    "Maya takes piano lessons on Tuesdays",                                 # 5
    "Leo is allergic to penicillin",                                        # 6
    "The user is lactose intolerant",                                       # 7
    "The user drinks oat milk in his tea",                                  # 8
    "The user's dog is a border collie called Biscuit",                     # 9
    "Biscuit needs his flea treatment every three months",                  # 10
    "The user drives a 2019 Skoda Octavia estate",                          # 11
    "The Skoda's MOT is due in June",                                       # 12
    "The user plays five-a-side football on Wednesday evenings",            # 13
    "The user supports Leeds United",                                       # 14
    "The user is training for the York half marathon in October",           # 15
    "The user enjoys running by the canal",                                 # 16
    "The user likes going for runs along the river",                        # 17
    "The user loves running",                                               # 18
    "My parents live in Lagos",                                             # 19
    "The user's mother is called Grace",                                    # 20
    "The user visits his parents every December",                           # 21
    "The user's brother Tunde is a doctor in Manchester",                   # 22
    "My GP is Dr Patel at the Hyde Park surgery",                           # 23
    "The user is reading The Overstory by Richard Powers",                  # 24
    "The user prefers science fiction and nature writing",                  # 25
    "The user's favourite food is jollof rice",                             # 26
    "The user cannot eat shellfish",                                        # 27
    "The user is learning Spanish on Duolingo",                             # 28
    "The user wants to visit Patagonia next year",                          # 29
    "The user's wedding anniversary is on 22 August",                       # 30
    "The user banks with Nationwide",                                       # 31
    "The user's phone is a Pixel 7",                                        # 32
    "The user's laptop is a ThinkPad X1 Carbon",                            # 33
    "The user uses Linux at home and Windows at school",                    # 34
    "The user usually goes to bed around 11 pm",                            # 35
    "The user gets up at 6:30 on weekdays",                                 # 36
    "The user's gym membership costs 35 pounds a month",                    # 37
    "The user volunteers at a food bank on Saturday mornings",              # 38
    "The user grows tomatoes and chillies on his allotment",                # 39
    "The user's favourite band is Radiohead",                               # 40
    "The user plays bass guitar in a covers band",                          # 41
    "The user's best friend from university is Chris",                      # 42
    "The user studied chemistry at the University of Manchester",           # 43
    "The user takes amlodipine for his blood pressure",                     # 44
    "My passport expires in 2028",                                          # 45
    "The home wifi network is called OkaforNet",                            # 46
    "Sam's birthday is on 2 May",                                           # 47
    "The user prefers tea over coffee",                                     # 48
    "The user's surname is Okafor",                                         # 49
]
HOUSEHOLD_PRESENT = [
    ("What's my job?", {0}), ("where do I work", {1, 0}), ("Who do I live with?", {2}), ("what does Sam do", {3}),
    ("How old are my kids?", {4}), ("when is piano", {5}), ("Is anyone in the family allergic to medicine?", {6}),
    ("can I have milk", {7, 8}), ("What breed is our dog?", {9}), ("when is the flea treatment due", {10}),
    ("what do I drive", {11}), ("When is the car's MOT?", {12}), ("What sports do I play?", {13}),
    ("which football team do I support", {14}), ("what race am I training for", {15}),
    ("where do my parents live", {19}), ("What's my mum's name?", {20}), ("what does my brother do", {22}),
    ("What book am I reading at the moment?", {24}), ("what kind of books do I like", {25, 24}),
    ("favourite dish", {26}), ("Which foods should I avoid?", {27, 7}), ("Which language am I learning?", {28}),
    ("where do I want to travel", {29}), ("When is our anniversary?", {30}), ("what phone do I have", {32}),
    ("what computer do I use", {33, 34}), ("what time do I wake up", {36}), ("how much is the gym", {37}),
    ("What do I do on Saturday mornings?", {38}), ("what do I grow in the garden", {39}),
    ("who is my doctor", {23}), ("what medication do I take", {44}), ("what music do I like", {40, 41}), ("What instrument do I play?", {41}),
    ("where did I go to university", {43}), ("when is Sam's birthday", {47}), ("coffee or tea?", {48, 8}),
]
HOUSEHOLD_ABSENT = [
    "what is my blood type", "how much is my rent", "what's my shoe size", "when is the boiler service due",
    "what is my national insurance number", "who is my dentist", "what is my salary",
    "which hotel did we book in Rome", "what's the plumber's phone number", "when did I last get a haircut",
    "who is my pension provider", "how tall am I", "what's the door code at work",
    "which charity do I give to every month", "what's my car registration number", "what is Leo's shoe size",
    "when is the next parents' evening", "what is my cholesterol level", "what's the name of my landlord",
    "how much did the new sofa cost",
]

def _issue15():
    from locomo import PERSONAL_ABSENT, PERSONAL_FACTS, PERSONAL_K, PERSONAL_PRESENT

    return PERSONAL_FACTS, PERSONAL_PRESENT, PERSONAL_ABSENT, PERSONAL_K


# name -> (facts, questions with the facts that answer them, absent-topic questions, results looked at).
# "issue15" is issue 15's small vault (bench/locomo.py's PERSONAL_*), at k = 5 as there; the issue's
# sets and issue 15's were what choices were made on; "household" confirms them.
SETS = {
    "issue15": None,
    "issue": (ISSUE_FACTS, ISSUE_PRESENT, [], K),
    "household": (HOUSEHOLD_FACTS, HOUSEHOLD_PRESENT, HOUSEHOLD_ABSENT, K),
}


def get_set(name: str):
    return _issue15() if name == "issue15" else SETS[name]


def build(workdir, name: str) -> str:
    """The vault of one set under workdir (built once, through `Memvault.add`), its path."""
    import shutil

    import memvault

    facts = get_set(name)[0] if name in SETS else COFFEE_FACTS
    vault = Path(workdir) / f"personal-{name}"
    marker = vault / ".built"
    if not marker.exists() or marker.read_text() != "\n".join(facts):
        shutil.rmtree(vault, ignore_errors=True)
        vault.mkdir(parents=True)
        memvault.open_vault(vault).add(facts, created_at="2026-01-01T12:00:00Z")
        marker.write_text("\n".join(facts))
    return str(vault)


def run_set(vault, name: str, options: dict) -> dict:
    """Answered questions (one of its facts among the first K) and absent-topic questions that
    return nothing, with the questions missed, for one set through `Memvault.search`."""
    facts, present, absent, k = get_set(name)
    missed, answered, first = [], 0, 0
    for question, gold in present:
        texts = [r.text for r in vault.search(question, top_k=k, **options).results]
        if any(facts[i] in texts for i in gold):
            answered += 1
            first += texts[0] in {facts[i] for i in gold}
        else:
            missed.append(question)
    returned = [q for q in absent if vault.search(q, top_k=k, **options).results]
    return {"answered": answered, "first": first, "present": len(present), "missed": missed,
            "absent_none": len(absent) - len(returned), "absent": len(absent), "absent_returned": returned}


def run_coffee(vault, options: dict) -> bool:
    """The coffee/tea case: the tea is among the first three results."""
    return "The user likes green tea" in [r.text for r in vault.search(COFFEE_QUESTION, top_k=K, **options).results]


def measure(workdir, variants: dict, sets=tuple(SETS)) -> dict:
    """These sets (and the coffee/tea case) under every variant ({name: locomo_variants.Variant})."""
    import memvault
    from locomo_variants import patched

    vaults = {name: memvault.open_vault(build(workdir, name)) for name in [*sets, "coffee"]}
    out = {}
    for label, variant in variants.items():
        with patched(variant):
            out[label] = {name: run_set(vaults[name], name, variant.options) for name in sets}
            out[label]["coffee"] = run_coffee(vaults["coffee"], variant.options)
    return out


def main(argv=None) -> int:
    import argparse
    import json
    import os
    import sys
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import locomo_variants
    from locomo import clean_environment

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default="now", help="comma-separated names of bench/locomo_variants.py")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "memvault-personal")
    ap.add_argument("--sets", default=",".join(SETS), help=f"which of {', '.join(SETS)} (default: all)")
    ap.add_argument("-v", "--verbose", action="store_true", help="name the questions missed")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out" / "personal.json")
    args = ap.parse_args(argv)
    clean_environment()
    chosen = {n: locomo_variants.ALL[n] for n in args.variants.split(",")}
    found = measure(args.workdir, chosen, args.sets.split(","))
    for label, sets in found.items():
        parts = [f"{name} {r['answered']}/{r['present']} ({r['first']} first)" + (f", absent none {r['absent_none']}/{r['absent']}"
                                                             if r["absent"] else "") for name, r in sets.items()
                 if name != "coffee"]
        print(f"{label:40s} " + "; ".join(parts) + f"; coffee/tea {'yes' if sets['coffee'] else 'no'}")
        if args.verbose:
            for name, r in sets.items():
                if name != "coffee" and (r["missed"] or r["absent_returned"]):
                    print(f"   {name}: missed {r['missed']}; absent answered {r['absent_returned']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"load": os.getloadavg(), "results": found}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
