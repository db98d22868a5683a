"""A synthetic personal memory: short, realistic sentences about one person's life and work.

Deterministic for a given seed. Memories are spread over several conversations and over
two years ending at ``END``; most are facts, some are notes (with a source) and decisions
(with a rationale), a few carry tags, as `memvault add --jsonl` accepts them.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

END = datetime(2026, 11, 21, 9, 0, tzinfo=timezone.utc)
SPAN = timedelta(days=730)

COLLEAGUES = ["Priya", "Tomás", "Aiko", "Ben", "Fatima", "Jonas", "Wei", "Olga", "Marcus", "Lena", "Ravi", "Chloé"]
PROJECTS = ["the billing migration", "the Atlas search service", "the mobile onboarding redesign",
            "the quarterly planning deck", "the data retention policy", "the payments API v3",
            "the on-call runbook", "the customer churn dashboard", "the Kafka upgrade", "the hiring loop for the SRE role",
            "the design system audit", "the latency budget for checkout", "the Postgres 16 upgrade",
            "the partner integration with Northwind", "the accessibility review"]
TOOLS = ["Terraform", "Grafana", "Rust", "TypeScript", "dbt", "Kubernetes", "Figma", "Jupyter", "Airflow", "Bazel",
         "Go", "Snowflake", "Linear", "Notion", "PagerDuty"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
HOURS = ["7:30", "8 am", "9:15", "10 am", "noon", "1:30 pm", "3 pm", "4:45 pm", "6 pm", "8 pm"]
KIDS = ["Maya", "Leo"]
FAMILY = ["Sam", "Maya", "Leo", "Ruth", "Grandpa Joe", "aunt Carla", "cousin Nina"]
ACTIVITIES = ["piano", "swimming", "football", "chess", "ballet", "climbing", "violin", "judo", "art", "coding club"]
FOODS = ["ramen", "shakshuka", "mushroom risotto", "green curry", "sourdough", "lentil soup", "tacos al pastor",
         "dumplings", "paella", "miso salmon", "banana bread", "falafel"]
DRINKS = ["oat flat whites", "green tea", "sparkling water", "espresso", "rooibos", "cold brew"]
PLACES = ["Lisbon", "Kyoto", "the Lake District", "Berlin", "Oaxaca", "Reykjavik", "Vancouver", "the Dolomites",
          "Edinburgh", "Seoul", "Crete", "Montreal"]
LOCAL = ["the river path", "Victoria Park", "the canal", "the old railway line", "the harbour", "Hampstead Heath"]
BOOKS = ["Piranesi", "The Overstory", "Thinking in Systems", "Klara and the Sun", "Designing Data-Intensive Applications",
         "The Dispossessed", "Four Thousand Weeks", "A Psalm for the Wild-Built", "Staff Engineer", "Tomorrow, and Tomorrow"]
HOBBIES = ["bouldering", "sourdough baking", "film photography", "trail running", "learning Japanese", "woodworking",
           "playing the cello", "birdwatching", "growing tomatoes", "sketching"]
HEALTH = ["physio for the left knee", "a blood test", "the annual check-up", "a dentist appointment", "an eye test",
          "a skin check", "a flu jab", "a sleep study"]
SOURCES = ["https://martinfowler.com/articles/", "https://lwn.net/Articles/", "https://arxiv.org/abs/2403.",
           "Staff Engineer, ch. 4", "the team wiki", "https://www.postgresql.org/docs/16/", "a podcast with Kelsey"]

# (conversation, kind, template); kinds: fact, note, decision
TEMPLATES = [
    ("work", "fact", "{colleague} will review the design doc for {project} by {weekday}."),
    ("work", "fact", "Dana's manager {colleague} wants a written update on {project} every {weekday}."),
    ("work", "fact", "Dana paired with {colleague} on {project} and found a bug in the retry logic."),
    ("work", "fact", "The standup moved to {hour} because {colleague} is in a different time zone now."),
    ("work", "fact", "{project} slipped by {n} weeks after the load test failed."),
    ("work", "fact", "Dana is the on-call lead for {project} in {month}."),
    ("work", "fact", "{colleague} prefers async reviews in {tool_b} over meetings."),
    ("work", "fact", "Dana gave a talk about {project} at the {month} all-hands."),
    ("work", "fact", "The team chose {tool} for {project}."),
    ("work", "fact", "{colleague} is leaving the company at the end of {month}."),
    ("work", "fact", "Dana's one-to-one with {colleague} is on {weekday} at {hour}."),
    ("work", "fact", "The incident on {weekday} was caused by an expired certificate in {project}."),
    ("work", "note", "Read about error budgets; the main idea is to spend reliability like money on {project}."),
    ("work", "note", "Notes from the {tool} workshop: keep modules small and version every interface."),
    ("work", "decision", "Use {tool} instead of {tool_b} for {project}."),
    ("work", "decision", "Freeze new features on {project} until the {month} release."),
    ("side-project", "fact", "Dana's side project is a habit tracker written in {tool}."),
    ("side-project", "fact", "The habit tracker has {n}0 weekly active users after the {month} launch."),
    ("side-project", "fact", "{colleague} offered to help with the habit tracker's landing page."),
    ("side-project", "note", "Idea: the habit tracker could send a weekly digest on {weekday} mornings."),
    ("side-project", "decision", "Host the habit tracker on a single small VM to keep costs under {n}0 euros."),
    ("family", "fact", "{kid} has {activity} lessons every {weekday} at {hour}."),
    ("family", "fact", "Sam's birthday is on {month} {day}."),
    ("family", "fact", "{family} is visiting for a week in {month}."),
    ("family", "fact", "{kid} lost a front tooth on {weekday}."),
    ("family", "fact", "{kid}'s favourite dinner is {food}."),
    ("family", "fact", "Dana and Sam have been married for {n} years."),
    ("family", "fact", "{kid} wants to switch from {activity} to {activity_b}."),
    ("family", "fact", "Ruth, Dana's mother, moved into a flat near {local}."),
    ("family", "fact", "The school parents' evening for {kid} is on {month} {day}."),
    ("family", "decision", "{kid} can have a phone after turning {n}2."),
    ("health", "fact", "Dana ran {n} km along {local} on {weekday} morning."),
    ("health", "fact", "Dana has {health} on {month} {day} at {hour}."),
    ("health", "fact", "Dana is allergic to penicillin."),
    ("health", "fact", "Dana cut back on caffeine and now drinks {drink} after lunch."),
    ("health", "fact", "Dana's resting heart rate dropped to {n}8 after three months of running."),
    ("health", "fact", "Dana sleeps badly when working late on {project}."),
    ("health", "decision", "Train for a half marathon in {month} with three runs a week."),
    ("travel", "fact", "Dana and Sam booked a trip to {place} for {month}."),
    ("travel", "fact", "Dana's passport expires in {month} {year}."),
    ("travel", "fact", "The best meal in {place} was {food} at a tiny place near the station."),
    ("travel", "fact", "Dana got food poisoning in {place} and lost two days of the trip."),
    ("travel", "fact", "The flight to {place} leaves on {weekday} at {hour}."),
    ("travel", "note", "For {place}: book trains early, carry cash, and avoid {month} because of the crowds."),
    ("travel", "decision", "Spend the summer holiday in {place} rather than {place_b}."),
    ("global", "fact", "Dana prefers {drink} over {drink_b}."),
    ("global", "fact", "Dana is reading {book}."),
    ("global", "fact", "Dana finished {book} and rated it {n} out of 5."),
    ("global", "fact", "Dana started {hobby} in {month}."),
    ("global", "fact", "Dana's favourite food is {food}."),
    ("global", "fact", "Dana cooked {food} for {family} on {weekday}."),
    ("global", "fact", "Dana lives in Bristol, near {local}."),
    ("global", "fact", "Dana wants to get better at {hobby} this year."),
    ("global", "fact", "Dana dislikes meetings before {hour}."),
    ("global", "fact", "Dana's bike was stolen outside the library on {weekday}."),
    ("global", "fact", "Dana pays the council tax by direct debit on the {day}th."),
    ("global", "fact", "Dana's car is due for its MOT in {month}."),
    ("global", "fact", "Dana uses {tool} at work and {tool_b} for personal projects."),
    ("global", "note", "Quote from {book}: pay attention to the things you keep postponing."),
    ("global", "decision", "Stop checking email on {weekday}s."),
    ("global", "decision", "Buy a second-hand road bike instead of a new one."),
]

CONVERSATIONS = sorted({t[0] for t in TEMPLATES})

QUERIES = [
    ("work", "who reviews the design doc and when"),
    ("work", "why did the project slip"),
    ("family", "what lessons do the kids have during the week"),
    ("health", "how is the running going"),
    ("travel", "where are we going on holiday"),
    ("global", "what food does Dana like"),
    ("work", "which tool did the team pick for the migration"),
    ("family", "when is Sam's birthday"),
    ("global", "what book is Dana reading"),
    ("side-project", "how many users does the habit tracker have"),
]


def _fill(template: str, rng: random.Random) -> str:
    c, c2 = rng.sample(COLLEAGUES, 2)
    t, t2 = rng.sample(TOOLS, 2)
    a, a2 = rng.sample(ACTIVITIES, 2)
    d, d2 = rng.sample(DRINKS, 2)
    p, p2 = rng.sample(PLACES, 2)
    return template.format(
        colleague=c, colleague_b=c2, project=rng.choice(PROJECTS), tool=t, tool_b=t2, weekday=rng.choice(WEEKDAYS),
        month=rng.choice(MONTHS), hour=rng.choice(HOURS), kid=rng.choice(KIDS), family=rng.choice(FAMILY),
        activity=a, activity_b=a2, food=rng.choice(FOODS), drink=d, drink_b=d2, place=p, place_b=p2,
        local=rng.choice(LOCAL), book=rng.choice(BOOKS), hobby=rng.choice(HOBBIES), health=rng.choice(HEALTH),
        n=rng.randint(2, 9), day=rng.randint(1, 28), year=rng.choice([2027, 2028, 2029]),
    )


def memories(n: int, seed: int = 5) -> list[dict]:
    """n JSON-line records for `memvault add --jsonl`, oldest first."""
    rng = random.Random(seed)
    stamps = sorted(END - SPAN * rng.random() for _ in range(n))
    out = []
    for stamp in stamps:
        conversation, kind, template = rng.choice(TEMPLATES)
        record = {"text": _fill(template, rng), "conversation_id": conversation, "kind": kind,
                  "created_at": stamp.isoformat(timespec="seconds")}
        if kind == "note":
            record["source"] = rng.choice(SOURCES)
        elif kind == "decision":
            record["rationale"] = "It keeps things simple and we can revisit it in " + rng.choice(MONTHS) + "."
        if rng.random() < 0.1:
            record["tags"] = [conversation, rng.choice(["important", "todo", "idea", "follow-up"])]
        out.append(record)
    return out


def questions(n: int) -> list[tuple[str | None, str]]:
    """n different (conversation or None, question) pairs over the synthetic vault's vocabulary."""
    forms = [
        lambda i: QUERIES[i % len(QUERIES)],
        lambda i: ("work", f"what did {COLLEAGUES[i % 12]} say about {PROJECTS[i % 15]}"),
        lambda i: ("family", f"what does {FAMILY[i % 7]} do on {WEEKDAYS[i % 7]}"),
        lambda i: ("travel", f"the trip to {PLACES[i % 12]} in {MONTHS[i % 12]}"),
        lambda i: ("global", f"does Dana like {FOODS[i % 12]} or {DRINKS[i % 6]}"),
        lambda i: ("health", f"when is {HEALTH[i % 8]}"),
        lambda i: ("work", f"why did the team choose {TOOLS[i % 15]}"),
        lambda i: ("side-project", f"progress with {HOBBIES[i % 10]} and {BOOKS[i % 10]}"),
    ]
    out = []
    for i in range(n):
        conversation, question = forms[i % len(forms)](i // len(forms) + i)
        out.append((conversation if i % 2 == 0 else None, f"{question} ({i})" if i >= 2 * len(forms) else question))
    return out
