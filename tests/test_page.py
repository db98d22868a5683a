"""The page (issue 43; faces/routes_page.py, faces/page_kit.py): rendered by serve's application, driven with
FastAPI's TestClient (httpx, in process: cheap), as a browser sends it: forms urlencoded, cookies kept,
redirects followed. What a user would notice: their words shown as text, never as markup; a change only by
a POST carrying the page's token; filters and pages that list what they say; a change committed as git
says; the key asked for once; secrets shown as placeholders. The same pages in a real browser:
tests/test_page_browser.py (slow)."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone
from html import unescape
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import memvault
from conftest import git, run_memvault, seed
from memvault.faces.serve import ServeOptions, build_app
from memvault.store import files

MARKUP = '<script>alert("x")</script> <b>bold</b> & <img src=x onerror=alert(1)>'
T0 = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)


def client_for(vault_dir: Path, **options) -> TestClient:
    vault = memvault.open_vault(vault_dir)
    app, _ = build_app(vault, ServeOptions(**options), lambda message: None)
    return TestClient(app, base_url="http://127.0.0.1")


def token(client: TestClient, path: str = "/") -> str:
    page = client.get(path)
    assert page.status_code == 200, page.text
    return re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)[1]


def ids_listed(html: str) -> list[str]:
    """The memories a list shows, in its order (each line's link)."""
    return re.findall(r'class="text open" href="/memory/([0-9a-f-]+)"', html)


def head(vault_dir: Path) -> str:
    return git(vault_dir, "rev-parse", "HEAD").strip()


def text_of(vault_dir: Path, memory_id: str) -> str:
    return memvault.open_vault(vault_dir).get(memory_id).text


# -- escaping, and the words on the page ----------------------------------------------------------------

def test_a_memory_holding_markup_is_shown_as_text_on_every_page(vault_dir):
    [marked] = seed(MARKUP, tags=["<i>t</i>"])
    client = client_for(vault_dir)
    for path in ("/", f"/memory/{marked.id}", "/search?query=alert+bold", "/changes", "/?tags=<i>t</i>"):
        html = client.get(path).text
        assert "<script>alert" not in html and "<b>bold" not in html and "<img src=x" not in html, path
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html, path
    assert re.search(r"<script[^>]*>", client.get(f"/memory/{marked.id}").text.replace(
        '<script src="/static/page.js', "")) is None
    response = client.get("/")
    assert "script-src 'self'" in response.headers["content-security-policy"]  # and no inline script runs


def test_secrets_a_file_still_holds_are_shown_as_placeholders(vault_dir):
    """A file written by hand (or before memvault withheld secrets) and its git history hold the key; the
    page shows its placeholder, on the timeline, the memory's page and the diff of its history."""
    [plain] = seed("The deploy key lives in the vault")
    key = "sk-proj-" + "Zq8vN2xL5tR7wY1bK4mP9sD3fG6hJ0cV2nB8xQ5zT7yU1iO4"
    path = plain.path
    path.write_text(path.read_text().replace("The deploy key lives in the vault", f"The deploy key is {key}"))
    git(vault_dir, "commit", "-qam", "a key, by hand")  # history holds it now
    client = client_for(vault_dir)
    for page in ("/", f"/memory/{plain.id}"):
        html = client.get(page).text
        assert key not in html and key[-20:] not in html, page
        assert "[secret: " in html, page
    assert 'class="add">+The deploy key is [secret: ' in unescape(client.get(f"/memory/{plain.id}").text)


# -- changes: POST with the page's token, never by GET ---------------------------------------------------

def test_a_change_without_the_pages_token_or_from_another_site_is_refused(vault_dir):
    [fact] = seed("The user likes tea")
    client = client_for(vault_dir)
    before = head(vault_dir)
    right = token(client, f"/memory/{fact.id}")
    for form, headers in (({"text": "The user likes coffee", "expected": "The user likes tea"}, {}),
                          ({"text": "The user likes coffee", "expected": "The user likes tea", "csrf": "0" * 64}, {}),
                          ({"text": "The user likes coffee", "expected": "The user likes tea", "csrf": right},
                           {"origin": "http://evil.example"}),
                          ({"text": "The user likes coffee", "expected": "The user likes tea", "csrf": right},
                           {"sec-fetch-site": "cross-site"})):
        refused = client.post(f"/memory/{fact.id}/edit", data=form, headers=headers, follow_redirects=False)
        assert refused.status_code == 403, refused.text
        assert "refused" in refused.text and "nothing was changed" in refused.text or "not from this page" in \
            refused.text or "another site" in refused.text
    # A browser with no session (another site's form: SameSite keeps the cookie home) has no token.
    stranger = client_for(vault_dir)
    refused = stranger.post(f"/memory/{fact.id}/remove", data={"csrf": right}, follow_redirects=False)
    assert refused.status_code == 403
    assert head(vault_dir) == before and text_of(vault_dir, fact.id) == "The user likes tea"
    assert not memvault.open_vault(vault_dir).get(fact.id).is_deleted


def test_nothing_changes_by_get(vault_dir):
    [fact] = seed("The user likes tea")
    client = client_for(vault_dir)
    before = head(vault_dir)
    for path in (f"/memory/{fact.id}/edit?text=x&expected=The+user+likes+tea", f"/memory/{fact.id}/remove",
                 f"/memory/{fact.id}/restore", "/undo", f"/review?keep={fact.id}", "/login?key=x"):
        response = client.get(path, follow_redirects=False)
        assert response.status_code in (200, 303, 405), (path, response.status_code)
    for path in ("/", "/search?query=tea", f"/memory/{fact.id}", "/review", "/changes", "/conversations",
                 "/conversations/global"):
        assert client.get(path).status_code == 200, path
    assert head(vault_dir) == before and git(vault_dir, "status", "--porcelain") == ""
    assert text_of(vault_dir, fact.id) == "The user likes tea"


def test_an_edit_is_a_commit_and_a_hand_edit_meanwhile_is_refused_keeping_the_words(vault_dir):
    [fact] = seed("The user likes tea")
    client = client_for(vault_dir)
    csrf = token(client, f"/memory/{fact.id}")
    done = client.post(f"/memory/{fact.id}/edit", data={"csrf": csrf, "expected": "The user likes tea",
                                                         "text": "The user likes green tea\r\nand <em>oolong</em>"})
    assert done.status_code == 200 and done.url.path == f"/memory/{fact.id}"
    assert text_of(vault_dir, fact.id) == "The user likes green tea\nand <em>oolong</em>"  # the form's CRLF
    commit = git(vault_dir, "log", "-1", "--format=%H %s").split(" ", 1)
    assert commit[1].startswith("memvault edit:")
    assert f"Edited {fact.id[:8]}, committed {commit[0][:8]}." in done.text  # said once, with its undo
    assert f'name="commit" value="{commit[0]}"' in done.text
    assert "&lt;em&gt;oolong" in done.text
    # The file changes by hand while the page is open: the page's edit is refused, the user's words stay.
    path = memvault.open_vault(vault_dir).get(fact.id).path
    path.write_text(path.read_text().replace("green tea", "black tea"))
    refused = client.post(f"/memory/{fact.id}/edit", data={"csrf": csrf, "text": "The user likes mint tea",
                                                            "expected": "The user likes green tea\nand <em>oolong</em>"})
    assert refused.status_code == 409
    assert "the memory changed since you read it" in refused.text
    assert ">The user likes mint tea</textarea>" in refused.text
    assert "black tea" in text_of(vault_dir, fact.id)


def test_remove_restore_and_undo_from_the_page(vault_dir):
    [fact] = seed("The user likes tea")
    client = client_for(vault_dir)
    csrf = token(client, f"/memory/{fact.id}")
    removed = client.post(f"/memory/{fact.id}/remove", data={"csrf": csrf, "reason": "not any more"})
    assert removed.status_code == 200 and "Removed" in removed.text and "Restore it" in removed.text
    assert memvault.open_vault(vault_dir).get(fact.id).extra["deleted_note"] == "not any more"
    assert ids_listed(client.get("/").text) == []
    assert ids_listed(client.get("/?deleted=false&deleted=true").text) == [fact.id]
    restored = client.post(f"/memory/{fact.id}/restore", data={"csrf": csrf})
    assert "RESTORE" in restored.text and not memvault.open_vault(vault_dir).get(fact.id).is_deleted
    changes = client.get("/changes").text
    assert "restored" in changes and "deleted" in changes
    undone = client.post("/undo", data={"csrf": csrf, "back": "/changes"})  # the newest: the restore
    assert undone.url.path == "/changes" and "Took back" in undone.text
    assert memvault.open_vault(vault_dir).get(fact.id).is_deleted
    assert git(vault_dir, "log", "-1", "--format=%s").startswith("memvault undo:")
    wrong = client.post("/undo", data={"csrf": csrf, "commit": "0" * 40, "back": "/changes"})
    assert "Nothing was taken back:" in wrong.text


# -- reading: filters, pages -------------------------------------------------------------------------------

def test_the_timeline_pages_through_every_memory_once_newest_first(vault_dir):
    texts = [f"Memory number {n} about the garden" for n in range(121)]
    stored = list(seed(*texts, created_at=T0))  # one moment for all: the cursor's id order pages them
    client = client_for(vault_dir)
    seen, url, pages = [], "/?limit=50", 0
    while url:
        html = client.get(url).text
        seen += ids_listed(html)
        pages += 1
        found = re.search(r'<a href="([^"]+)" rel="next"', html)
        url = unescape(found[1]) if found else None
        if url:
            assert "limit=50" in url and "cursor=" in url
    assert pages == 3 and len(seen) == 121 and set(seen) == {m.id for m in stored}
    assert seen == sorted(seen, reverse=True)  # same time: highest id first, as the library orders


def test_the_timeline_filters_by_conversation_kind_tag_and_time(vault_dir):
    vault = memvault.open_vault(vault_dir)
    [old] = vault.add("An old note about bees", kind="note", tags=["bees"], created_at=T0)
    [work] = vault.add("A decision at work", kind="decision", conversation="work", created_at=T0 + timedelta(days=2))
    [tagged] = vault.add("A fact about bees", tags=["bees", "garden"], created_at=T0 + timedelta(days=3))
    client = client_for(vault_dir)
    assert ids_listed(client.get("/").text) == [tagged.id, work.id, old.id]
    assert ids_listed(client.get("/?conversation=work").text) == [work.id]
    assert ids_listed(client.get("/?kinds=note&kinds=decision").text) == [work.id, old.id]
    assert ids_listed(client.get("/?tags=bees").text) == [tagged.id, old.id]
    assert ids_listed(client.get("/?tags=bees,+garden").text) == [tagged.id]
    assert ids_listed(client.get("/?since=2025-01-02&until=2025-01-03T23:00").text) == [work.id]
    page = client.get("/?conversation=work")
    assert 'name="conversation" value="work"' in page.text and "Clear the filters" in page.text
    bad = client.get("/?since=last+tuesday&limit=0")
    assert bad.status_code == 400 and "limit" in bad.text and 'role="alert"' in bad.text
    bad = client.get("/?since=not-a-date")
    assert bad.status_code == 400 and "since" in unescape(bad.text)


def test_each_line_carries_its_marks(vault_dir):
    vault = memvault.open_vault(vault_dir)
    [mine] = vault.add("The user lives in Lisbon")
    [guess] = vault.add("The user lives in Porto", meta={files.ORIGIN_KEY: "learned", "would_replace": [mine.id]})
    [hidden] = vault.add("my github token is ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")
    html = client_for(vault_dir).get("/").text
    lines = {memory_id: line for line in html.split('<li class="item"')[1:]
             for memory_id in ids_listed('<li class="item"' + line)}
    assert ">earlier<" in lines[mine.id] and "waiting for review" not in lines[mine.id]
    assert "waiting for review" in lines[guess.id] and ">earlier<" not in lines[guess.id]
    assert "secret withheld" in lines[hidden.id] and "ghp_" not in lines[hidden.id]


def test_search_with_and_without_explain(vault_dir):
    seed("The user's wife is called Anne", "The cat is called Tom", "Paris is the capital of France")
    client = client_for(vault_dir)
    page = client.get("/search?query=what+is+my+wife+called")
    assert page.status_code == 200
    assert "Anne" in re.findall(r'class="text open"[^>]*>([^<]+)<', page.text)[0]
    assert "<th scope=\"col\">dense</th>" not in page.text
    explained = client.get("/search?query=what+is+my+wife+called&explain=false&explain=true")
    assert '<th scope="col">dense</th>' in explained.text and '<th scope="col">score</th>' in explained.text
    assert client.get("/search").status_code == 200  # the form alone
    bad = client.get("/search?query=x&top_k=0")
    assert bad.status_code == 400 and "top_k" in bad.text


def test_a_memorys_page_shows_its_history_with_diffs_and_what_replaced_what(vault_dir):
    vault = memvault.open_vault(vault_dir)
    [mine] = vault.add("The user lives in Lisbon")
    [guess] = vault.add("The user lives in Porto", meta={files.ORIGIN_KEY: "learned", "would_replace": [mine.id]})
    vault.edit(mine.id, "The user lives in Lisbon, near the river")
    client = client_for(vault_dir)
    html = unescape(client.get(f"/memory/{mine.id}").text)
    assert "Proposed to replace it" in html and guess.id[:8] in html
    assert '<span class="del">-The user lives in Lisbon</span>' in html
    assert '<span class="add">+The user lives in Lisbon, near the river</span>' in html
    assert html.count('<details class="diff"') == 2  # the add and the edit, each with its diff
    vault.review_keep([guess.id])
    html = unescape(client.get(f"/memory/{mine.id}").text)
    assert "Replaced by" in html and "Restore it" in html and "deleted (update" in html or "deleted (contradiction" in html
    html = unescape(client.get(f"/memory/{guess.id}").text)
    assert "It replaced" in html and mine.id[:8] in html
    assert client.get("/memory/nosuchid").status_code == 404


def test_review_keep_edit_and_reject_from_the_page(vault_dir):
    vault = memvault.open_vault(vault_dir)
    [lisbon] = vault.add("The user lives in Lisbon")
    [porto] = vault.add("The user lives in Porto", meta={files.ORIGIN_KEY: "learned", "would_replace": [lisbon.id]})
    [figs] = vault.add("The user likes figs", meta={files.ORIGIN_KEY: "learned"})
    [dates] = vault.add("The user likes dates", meta={files.ORIGIN_KEY: "learned"})
    client = client_for(vault_dir)
    page = client.get("/review").text
    assert page.count('class="item review-item"') == 3
    side = page[page.index(f'id="r-{porto.id}"'):]
    assert "Would replace" in side[:side.index("</article>")] and "The user lives in Lisbon" in side[:side.index("</article>")]
    csrf = token(client, "/review")
    kept = client.post("/review", data={"csrf": csrf, "keep": porto.id, "back": "/review"})
    assert kept.url.path == "/review" and "Kept, committed" in kept.text
    assert memvault.open_vault(vault_dir).get(lisbon.id).is_deleted
    edited = client.post("/review", data={"csrf": csrf, "keep": figs.id, "text": "The user loves fresh figs"})
    assert "Kept" in edited.text and text_of(vault_dir, figs.id) == "The user loves fresh figs"
    rejected = client.post("/review", data={"csrf": csrf, "reject": dates.id, "reason": "wrong"})
    assert "Rejected" in rejected.text and memvault.open_vault(vault_dir).get(dates.id).is_deleted
    assert "Nothing waits for review." in client.get("/review").text
    both = client.post("/review", data={"csrf": csrf, "keep": figs.id, "reject": dates.id})
    assert "Nothing was done:" in both.text


def test_each_page_load_sees_what_changed_since_the_last(vault_dir):
    """The lookups by id of one page share one status of git (Index.one_status: review asked git once per
    proposal, issue 43); the next load asks git again. A memory written by hand between two loads of its page
    is found by the second; the fact a proposal would replace, removed by another process between two loads
    of the review page, is no longer shown beside it."""
    vault = memvault.open_vault(vault_dir)
    [lisbon] = vault.add("The user lives in Lisbon")
    [porto] = vault.add("The user lives in Porto", meta={files.ORIGIN_KEY: "learned", "would_replace": [lisbon.id]})
    client = client_for(vault_dir)
    time.sleep(1.2)  # past index.RACY_NS: the review page's sync vouches for the files, its record synced to HEAD
    assert client.get("/review").status_code == 200  # lookups by id now go by the record and git's word
    mine = "feedface-0000-4000-8000-000000000001"
    assert client.get(f"/memory/{mine}").status_code == 404
    dropped = vault_dir / "entries" / "global" / "notes" / "mine.md"
    dropped.parent.mkdir(parents=True, exist_ok=True)
    dropped.write_text(f"---\nid: {mine}\nrole: note\ncreated_at: 2026-01-01T00:00:00+00:00\n---\nA note of mine\n")
    page = client.get(f"/memory/{mine}")
    assert page.status_code == 200 and "A note of mine" in page.text

    def beside_porto() -> str:
        html = client.get("/review").text
        side = html[html.index(f'id="r-{porto.id}"'):]
        return side[:side.index("</article>")]

    assert "Would replace" in beside_porto() and "The user lives in Lisbon" in beside_porto()
    removed = run_memvault("--vault", str(vault_dir), "rm", lisbon.id)
    assert removed.returncode == 0, removed.stderr
    assert "Would replace" not in beside_porto() and "The user lives in Lisbon" not in beside_porto()


def test_conversations_and_one_conversation(vault_dir):
    vault = memvault.open_vault(vault_dir)
    vault.add(["Fact one", "Fact two"], conversation="work")
    vault.add("A note", kind="note", conversation="work")
    client = client_for(vault_dir)
    listing = client.get("/conversations").text
    assert 'href="/conversations/work"' in listing
    view = client.get("/conversations/work")
    assert view.status_code == 200 and "<dt>fact</dt><dd>2</dd>" in view.text and "No rolling summary yet." in view.text
    assert client.get("/conversations/nosuch").status_code == 404


# -- who may look ---------------------------------------------------------------------------------------------

def test_with_a_key_the_page_asks_for_it_once_and_the_api_still_wants_it(vault_dir):
    seed("The user likes tea")
    client = client_for(vault_dir, api_key="s3cret-key")
    first = client.get("/", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/login?next=%2F"
    csrf = token(client, "/login")
    wrong = client.post("/login", data={"csrf": csrf, "key": "nope", "next": "/"})
    assert wrong.status_code == 401 and "not this server's key" in unescape(wrong.text)
    entered = client.post("/login", data={"csrf": csrf, "key": "s3cret-key", "next": "//evil.example/"},
                          follow_redirects=False)
    assert entered.headers["location"] == "/"  # never another site
    cookie = entered.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "s3cret-key" not in cookie
    client.cookies.set("memvault_key", re.search(r"memvault_key=([0-9a-f]+)", cookie)[1])
    assert "The user likes tea" in client.get("/").text
    assert client.get("/v1/memories").status_code == 401  # the cookie is the page's only
    stranger = client_for(vault_dir, api_key="s3cret-key")
    assert stranger.post("/undo", data={}, follow_redirects=False).status_code == 401


def test_the_page_answers_to_its_own_address_only(vault_dir):
    """Without a key serve binds loopback only; a site that points its own name at 127.0.0.1 (DNS
    rebinding) would read the page: refused by its Host."""
    seed("The user likes tea")
    client = client_for(vault_dir)
    refused = client.get("/", headers={"host": "evil.example:8100"})
    assert refused.status_code == 403 and "The user likes tea" not in refused.text
    assert client.get("/", headers={"host": "localhost:8100"}).status_code == 200


def test_every_page_model_is_its_definitions(vault_dir):
    from memvault.faces.routes_page import MODELS

    for route, model in MODELS.items():
        in_path = set(re.findall(r"{(\w+)}", route))
        assert model.request.where["page"] == route
        assert set(model.model_fields) | in_path == model.request.expected("page"), route


def test_memvault_ui_passes_over_a_record_left_by_a_serve_that_died(vault_dir, tmp_path):
    """serve leaves .memvault/serve.json while it runs; one left by a killed serve (its process gone, or its
    address not answering) must not send `memvault ui` to a dead address: it starts a serve instead."""
    import subprocess
    import sys

    from memvault.faces import ui

    seed("The user likes tea")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    ui.announce(vault_dir, "127.0.0.1", 9)
    record = ui.record_path(vault_dir)
    assert record.stat().st_mode & 0o777 == 0o600
    record.write_text(record.read_text().replace(f'"pid": {__import__("os").getpid()}', f'"pid": {gone.pid}'))
    assert ui.running(vault_dir) is None
    ui.announce(vault_dir, "127.0.0.1", 9)  # a live process (this one), nothing answering at the address
    assert ui.running(vault_dir) is None
    ui.withdraw(vault_dir)
    assert not record.exists()
