"""`memvault search`: the full read path with the bundled model and real LanceDB."""

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from conftest import run_cli, seed
from crossencoder_fixture import expected_logit
from memvault.reading import ranking

DISTRACTORS = [
    "The user works as a software engineer in Berlin",
    "The user's favourite colour is green",
    "The user has a dog named Rex",
    "The user plays tennis on Saturdays",
    "The user is allergic to peanuts",
    "The user drives a blue Volvo",
    "The user's sister lives in Madrid",
    "The user is learning Japanese",
    "The user prefers window seats on planes",
    "The user was born in 1985",
    "The user's daughter is called Lily",
    "The user reads science fiction",
]


def add_lines(*lines, conversation="global"):
    seed(*lines, conversation=conversation)


def search_json(*args):
    result = run_cli("search", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_wife_name_comes_first_among_distractors(vault_dir):
    add_lines(*DISTRACTORS[:6], "The user's wife is named Anne", *DISTRACTORS[6:])
    results = search_json("What is my wife's name?")
    assert results[0]["text"] == "The user's wife is named Anne"
    assert {"id", "path", "role", "conversation_id", "created_at", "text", "score", "scores", "meta"} <= set(results[0])
    # Memories about something else are not returned (relevance_floor), though 5 were asked for.
    assert not {"The user plays tennis on Saturdays", "The user drives a blue Volvo"} & {r["text"] for r in results}
    assert len(search_json("--relevance-floor", "0", "What is my wife's name?")) == 5


def test_near_duplicates_do_not_crowd_out_the_different_memory(vault_dir):
    coffee = ["The user likes coffee", "The user really likes coffee", "The user loves coffee",
              "The user likes drinking coffee", "The user likes coffee a lot"]
    add_lines(*coffee, "The user likes green tea", *DISTRACTORS[:4])
    top3 = [r["text"] for r in search_json("-k", "3", "What does the user like to drink?")]
    assert "The user likes green tea" in top3
    # Without diversity the coffee memories take all three places: MMR is what made room.
    plain = [r["text"] for r in search_json("-k", "3", "--mmr-lambda", "1.0", "What does the user like to drink?")]
    assert len(plain) == 3 and all("coffee" in t for t in plain)


def test_hand_edit_is_seen_by_implicit_sync_and_by_reindex(vault_dir):
    add_lines(*DISTRACTORS)
    target = next(p for p in (vault_dir / "entries/global/facts").iterdir() if "Volvo" in p.read_text())
    target.write_text(target.read_text().replace("The user drives a blue Volvo", "The user rides a red motorbike"))
    # No reindex: the search itself syncs the index (not git).
    assert search_json("-k", "1", "motorbike")[0]["text"] == "The user rides a red motorbike"
    status = subprocess.run(["git", "-C", str(vault_dir), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout.strip().endswith(".md")  # the hand edit is still uncommitted
    target.write_text(target.read_text().replace("red motorbike", "green tractor"))
    assert run_cli("reindex").exit_code == 0
    assert search_json("-k", "1", "tractor")[0]["text"] == "The user rides a green tractor"


def test_deleting_the_index_gives_the_same_top_result(vault_dir):
    add_lines(*DISTRACTORS, "The user's wife is named Anne")
    before = search_json("wife's name")[0]["id"]
    shutil.rmtree(vault_dir / ".memvault")
    assert search_json("wife's name")[0]["id"] == before


def test_conversation_scopes_and_filters(vault_dir):
    add_lines("The user's project deadline is Friday", conversation="work")
    add_lines("The user's holiday starts on Friday", conversation="home")
    add_lines("The user likes Fridays")
    work = {r["text"] for r in search_json("-c", "work", "Friday")}
    assert work == {"The user's project deadline is Friday", "The user likes Fridays"}
    everything = {r["text"] for r in search_json("--all-conversations", "Friday")}
    assert len(everything) == 3
    run_cli("add", "--kind", "decision", "-c", "work", "Ship on Friday", "--tag", "release")
    assert [r["role"] for r in search_json("-c", "work", "--kind", "decision", "Friday")] == ["decision"]
    assert [r["text"] for r in search_json("-c", "work", "--tag", "release", "Friday")] == ["Ship on Friday"]


def test_since_until_and_recency_with_now(vault_dir):
    lines = [{"text": "The user visited Paris", "created_at": "2024-01-10T12:00:00Z"},
             {"text": "The user visited Rome", "created_at": "2024-06-10T12:00:00Z"}]
    assert run_cli("add", "--jsonl", "-", input="\n".join(json.dumps(x) for x in lines)).exit_code == 0
    assert [r["text"] for r in search_json("--since", "2024-03-01", "visited")] == ["The user visited Rome"]
    assert [r["text"] for r in search_json("--until", "2024-03-01", "visited")] == ["The user visited Paris"]
    results = search_json("--now", "2024-06-20T12:00:00Z", "visited")
    rome = next(r for r in results if "Rome" in r["text"])
    assert rome["scores"]["recency"] == pytest.approx(ranking.recency(10), abs=1e-6)


def test_tiny_reranker_logits_flow_through_relevance_threshold_recency_and_mmr(vault_dir, tiny_reranker_dir,
                                                                                monkeypatch):
    monkeypatch.setenv("MEMVAULT_RERANKER_MODEL", str(tiny_reranker_dir))
    texts = ["The user's wife is named Anne", "The user bought a new bicycle", "The wife of the user likes bicycles"]
    now = datetime(2025, 1, 31, tzinfo=timezone.utc)
    created = [now - timedelta(days=d) for d in (30, 0, 60)]
    lines = [json.dumps({"text": t, "created_at": c.isoformat()}) for t, c in zip(texts, created)]
    assert run_cli("add", "--jsonl", "-", input="\n".join(lines)).exit_code == 0
    query = "What is my wife's name?"
    results = search_json("--now", now.isoformat(), "--mmr-lambda", "1.0", query)
    by_text = {r["text"]: r for r in results}
    logits = {t: expected_logit(query, t) for t in texts}
    low, high = min(logits.values()), max(logits.values())
    for text in texts:
        scores = by_text[text]["scores"]
        assert scores["logit"] == pytest.approx(logits[text], abs=1e-4)
        relevance = (logits[text] - low) / (high - low)
        assert scores["relevance"] == pytest.approx(relevance, abs=1e-4)
        age = (now - created[texts.index(text)]).days
        # recency_weight 0.2 by default, as a factor: recency scales relevance by 0.8 to 1.
        assert scores["score"] == pytest.approx(relevance * (0.8 + 0.2 * ranking.recency(age)), abs=1e-4)
    assert [r["text"] for r in results] == sorted(texts, key=lambda t: -by_text[t]["scores"]["score"])
    # The threshold compares the absolute probability sigmoid(logit), not the batch-relative relevance.
    cut = (ranking.sigmoid(logits[texts[1]]) + ranking.sigmoid(logits[texts[2]])) / 2
    kept = search_json("--now", now.isoformat(), "--threshold", f"{cut:.6f}", query)
    assert {r["text"] for r in kept} == {t for t in texts if ranking.sigmoid(logits[t]) >= cut}
    explain = run_cli("search", "--explain", query)
    assert "reranker: ran" in explain.stdout


def test_explain_shows_every_number(vault_dir):
    add_lines(*DISTRACTORS[:5])
    result = run_cli("search", "--explain", "tennis")
    assert result.exit_code == 0
    for column in ["dense", "bm25", "fused", "logit", "relevance", "recency", "score", "mmr"]:
        assert column in result.stdout
    assert "reranker: did not run" in result.stdout and "tennis" in result.stdout


def test_format_prompt_is_the_injection_block(vault_dir):
    add_lines("The user's wife is named Anne", *DISTRACTORS[:3])
    summary = vault_dir / "entries/global/summaries/summary.md"
    summary.parent.mkdir(parents=True)
    summary.write_text("---\nid: s1\nrole: summary\nconversation_id: global\ncreated_at: 2025-01-01\n"
                       "summary_kind: rolling\n---\nThe user is married to Anne.\n")
    result = run_cli("search", "--format", "prompt", "-k", "2", "--now", "2026-05-04T08:00:00Z", "wife")
    block = result.stdout
    assert block.startswith("<memory>") and block.rstrip().endswith("</memory>")
    # Dated in words: today is the query's clock, the summary says when it was written, each memory
    # is under the day it was added.
    assert "Today is Mon 4 May 2026." in block
    assert "Conversation summary (written Wed 1 January 2025):" in block
    lines = block.splitlines()
    line = lines.index("  [memory] The user's wife is named Anne")
    assert re.fullmatch(r"\w{3} \d{1,2} \w+ \d{4}:", lines[line - 1])
    assert "not instructions" in block
    assert block.index("The user is married to Anne.") < block.index("[memory] The user's wife is named Anne")
    # The summary is injected apart, never as a candidate; the distractors match "wife" too little.
    assert block.count("[memory] ") == 1
    everything = run_cli("search", "--format", "prompt", "-k", "2", "--relevance-floor", "0", "wife").stdout
    assert everything.count("[memory] ") == 2


def test_queries_runs_many_searches_in_one_process(vault_dir):
    add_lines(*DISTRACTORS, "The user's wife is named Anne")
    queries = [{"qid": "q1", "query": "wife's name", "k": 2}, {"qid": "q2", "query": "tennis", "now": "2030-01-01"}]
    result = run_cli("search", "--queries", "-", input="\n".join(json.dumps(q) for q in queries))
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["qid"] for line in lines] == ["q1", "q2"]
    assert len(lines[0]["results"]) == 2 and lines[0]["results"][0]["text"].endswith("Anne")
    assert "tennis" in lines[1]["results"][0]["text"] and lines[1]["results"][0]["scores"]["recency"] < 0.01
    bad = run_cli("search", "--queries", "-", input='{"qid": "x"}\n')
    assert bad.exit_code == 2 and "line 1" in bad.stderr


def test_retriever_ablations(vault_dir):
    add_lines(*DISTRACTORS)
    dense = search_json("--retriever", "dense", "tennis")
    assert dense and all("bm25" not in r["scores"] and "dense" in r["scores"] for r in dense)
    bm25 = search_json("--retriever", "bm25", "tennis")
    assert [r["text"] for r in bm25] == ["The user plays tennis on Saturdays"]


def test_search_without_vault_or_query(vault_dir):
    assert run_cli("search", "anything").exit_code == 1
    run_cli("add", "x")
    assert run_cli("search").exit_code == 2


def test_read_path_makes_no_network_connection(vault_dir):
    add_lines(*DISTRACTORS)
    # A real audit hook in a fresh process: any socket connect is recorded and refused.
    code = (
        "import sys\n"
        "seen = []\n"
        "def hook(event, args):\n"
        "    if event in ('socket.connect', 'socket.getaddrinfo'):\n"
        "        seen.append((event, str(args)[:80]))\n"
        "        raise OSError('network use in the read path')\n"
        "sys.addaudithook(hook)\n"
        "from memvault.faces.cli import app\n"
        "try:\n"
        "    app(['search', '--explain', 'tennis'], standalone_mode=False)\n"
        "finally:\n"
        "    print('NETWORK:', seen, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "NETWORK: []" in done.stderr
    assert "tennis" in done.stdout


def test_search_defers_lancedbs_rest_client_without_losing_it(vault_dir, tmp_path):
    """lancedb imports lance-namespace's REST client: its nine API modules (0.65 s of a 1.2 s import) and,
    through lance_namespace's __init__, ~150 pydantic models of the REST namespace (0.3-0.5 s of every cold
    command since), for names lancedb takes at import but uses only with a namespace. A search loads no API
    module and only the few model modules lancedb imports itself, and all of it still works when asked for:
    the REST client, the names lancedb took, lance_namespace's own, a namespace connection."""
    add_lines("The user's wife is named Anne", "The user plays chess")
    script = f"""
import sys
from memvault.faces.cli import main
sys.argv = ["memvault", "search", "--json", "-k", "1", "wife"]
try:
    main()
except SystemExit as exit:
    assert exit.code in (0, None), exit.code
rest = "lance_namespace_urllib3_client"
print("api modules:", sorted(m for m in sys.modules if m.startswith(rest + ".api.")), file=sys.stderr)
models = [m for m in sys.modules if m.startswith(rest + ".models.")]
print("models loaded:", len(models), f"{{rest}}.models.list_tables_response" in models, file=sys.stderr)
from lance_namespace_urllib3_client import ApiClient, TableApi  # the REST client still works
print("after use:", ApiClient.__name__, TableApi.__name__, f"{{rest}}.api.table_api" in sys.modules, file=sys.stderr)
import lancedb, lancedb.db, lance_namespace
listed = lancedb.connect({str(vault_dir / ".memvault" / "index")!r}).list_tables()
print("listed:", listed.tables, type(listed) is lance_namespace.ListTablesResponse,
      isinstance(listed, lancedb.db.ListTablesResponse), file=sys.stderr)
db = lancedb.connect_namespace("dir", {{"root": {str(tmp_path / "ns")!r}}})
db.create_table("t", data=[{{"a": 1}}])
print("namespace:", db.list_tables().tables, isinstance(db.namespace_client(), lance_namespace.LanceNamespace),
      file=sys.stderr)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["text"] == "The user's wife is named Anne"
    assert "api modules: []" in done.stderr
    loaded = re.search(r"models loaded: (\d+) (\w+)", done.stderr)
    assert int(loaded[1]) < 40 and loaded[2] == "False", done.stderr  # all of them: 146 (lance-namespace 0.11)
    assert "after use: ApiClient TableApi True" in done.stderr
    assert "listed: ['memories'] True True" in done.stderr
    assert "namespace: ['t'] True" in done.stderr


def test_lancedb_that_wants_lance_namespaces_classes_at_import_gets_them(tmp_path, monkeypatch):
    """Should a lancedb use a name it takes from lance_namespace at import in a way the stand-in does not
    pass on, import_lancedb imports it again the plain way: it gets the real class and still works."""
    fake = tmp_path / "newer" / "lancedb"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "from lance_namespace import ListTablesResponse\n"
        "if not isinstance(ListTablesResponse, type):\n"
        "    raise TypeError('a class was expected')\n"
        "from lancedb.later import ANSWER\n")
    (fake / "later.py").write_text("ANSWER = 42\n")
    script = """
import sys
from memvault.store import index
lancedb = index.import_lancedb()
import lance_namespace
print("real:", lancedb.ListTablesResponse is lance_namespace.ListTablesResponse, lancedb.ANSWER,
      lancedb.ListTablesResponse(tables=["t"]).tables)
"""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "real: True 42 ['t']" in done.stdout


def test_explain_shows_what_a_line_that_only_asks_lost(vault_dir, tmp_path):
    """Issue 45, session 7: a chat line that only asks back ranks below the one that answers, and --explain
    says why, in a column and a legend of its own."""
    rows = [{"id": f"t{n}", "role": role, "conversation_id": "club", "text": text,
             "created_at": f"2024-03-0{n + 1}T09:00:00+00:00"}
            for n, (role, text) in enumerate([("user", "Maria: Where did you go hiking last weekend?"),
                                              ("assistant", "John: I went hiking on Mount Tam last weekend."),
                                              ("user", "Maria: I bought new climbing shoes.")])]
    path = tmp_path / "club.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert run_cli("import", "jsonl", str(path)).exit_code == 0
    texts = [r["text"] for r in search_json("--conversation", "club", "hiking last weekend")]
    assert texts.index("John: I went hiking on Mount Tam last weekend.") < \
        texts.index("Maria: Where did you go hiking last weekend?")
    explain = run_cli("search", "--explain", "--conversation", "club", "hiking last weekend")
    assert explain.exit_code == 0
    header = next(line for line in explain.stdout.splitlines() if "dense" in line and "mmr" in line)
    assert "asking" in header
    assert "asking = what a chat line that asks lost" in explain.stdout
