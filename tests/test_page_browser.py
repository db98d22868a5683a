"""The page (issue 43) in a real browser: Debian's Chromium, driven by Selenium through chromedriver, against a
real `memvault serve` process over a vault of 1,000 memories (real files, git, LanceDB, fastembed). What a
person does: page through the timeline, search, open a memory and read its history's diff, review (keep a
proposal, reject a learned fact and see the fact it retired live again, edit one), edit a memory and find the
commit in `git log`, undo; and what an attacker would try: a change without the page's CSRF token, a memory
holding markup. The screenshots in docs/ (README's pictures) are taken here.

Skipped, with the reason, where Chromium, chromedriver or selenium is missing (.ci/run installs them:
`apt-get install chromium chromium-driver`, `pip install selenium`). Slow: one server and one browser for the
module (tens of seconds to seed and start), so in `-m slow`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from conftest import REPO, git
from fake_llm import FakeLLM
from test_serve import NOTHING_LEARNED, server_env, serving

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("MEMVAULT_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = os.environ.get("MEMVAULT_TEST_CHROMEDRIVER") or shutil.which("chromedriver") or "/usr/bin/chromedriver"
SHOTS = REPO / "docs"
MARKUP = '<script>window.pwned = 1</script><b>bold</b> <img src=x onerror="window.pwned = 2">'
T0 = datetime(2026, 1, 1, 9, 0, tzinfo=timezone.utc)
MANY = 1000


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium; .ci/run does)"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not (path and os.access(path, os.X_OK)):
            return f"{path} is missing (apt-get install {package}; .ci/run does)"
    return None


if _missing():
    pytest.skip(_missing(), allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ready  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def seed_vault(root: Path, env: dict[str, str], fake: FakeLLM) -> dict[str, str]:
    """1,000 memories over two conversations and a year, plus the ones the tests act on (the learned ones
    learned for real, from the scripted LLM); their ids, and how many the timeline lists."""
    import memvault
    from memvault.store import files

    lines = []
    for n in range(MANY):
        lines.append(json.dumps({"text": f"Garden log {n:04d}: watered the {['roses', 'figs', 'beans', 'mint'][n % 4]} "
                                         f"and noted {n % 7} new buds", "created_at": (T0 + timedelta(hours=8 * n)).isoformat(),
                                 "conversation_id": "garden" if n % 3 else "work",
                                 "kind": ["fact", "note", "decision"][(n // 3) % 3], "tags": ["log"]}))
    later = T0 + timedelta(hours=8 * MANY + 1)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        vault = memvault.open_vault(root)
        vault.add_jsonl("\n".join(lines))
        [lisbon] = vault.add("The user lives in Lisbon", created_at=later)
        [porto] = vault.add("The user lives in Porto", meta={files.ORIGIN_KEY: "learned", "would_replace": [lisbon.id]},
                            created_at=later + timedelta(minutes=1))
        [figs] = vault.add("The user likes figs", meta={files.ORIGIN_KEY: "learned"}, created_at=later + timedelta(minutes=2))
        [tea] = vault.add("The user drinks tea every morning", created_at=later + timedelta(minutes=3))
        [marked] = vault.add(MARKUP, kind="note", created_at=later + timedelta(minutes=4))
        vault.edit(tea.id, "The user drinks green tea every morning")
        # Learned replacing learned: Paris retires Rome at once; rejecting Paris brings Rome back.
        fake.push(json.dumps({"facts": ["The user's favourite city is Rome"]}))
        [rome] = vault.add_extracted("My favourite city is Rome", now=later + timedelta(minutes=5)).added
        fake.push(json.dumps({"facts": ["The user's favourite city is Paris now"]}), '{"answer": "no"}')
        learned = vault.add_extracted("My favourite city is Paris now, not Rome", now=later + timedelta(minutes=6))
        [(old, paris)] = learned.replaced
        assert old.id == rome.id, learned
        listed = len(vault.recent(limit=5000))
        vault.close()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {"lisbon": lisbon.id, "porto": porto.id, "rome": rome.id, "paris": paris.id, "figs": figs.id,
            "tea": tea.id, "marked": marked.id, "listed": listed}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("page")
    fake = FakeLLM()
    fake.default = NOTHING_LEARNED
    env = server_env(root, fake.base_url)
    try:
        ids = seed_vault(root / "vault", env, fake)
        with serving(env=env) as server:
            server.ids = ids
            yield server
    finally:
        fake.close()


@pytest.fixture(scope="module")
def browser(site):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000",
                 "--disable-gpu", "--no-first-run", "--disable-background-networking"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()  # chromedriver and its browser go (selenium's Service stops its process)


def go(browser, site, path: str):
    browser.get(site.url + path)
    WebDriverWait(browser, 60).until(ready.presence_of_element_located((By.ID, "main")))


def shot(browser, name: str) -> None:
    """docs/page-NAME.png: the page down to its end (at most 1,800 pixels), as README shows it."""
    size = browser.get_window_size()
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(size["width"], max(size["height"], min(int(height) + 140, 1800)))
    try:
        SHOTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(SHOTS / f"page-{name}.png"))
    finally:
        browser.set_window_size(size["width"], size["height"])


def listed(browser) -> list[str]:
    return [a.get_attribute("href").rsplit("/", 1)[1] for a in browser.find_elements(By.CSS_SELECTOR, "a.text.open")]


def click(browser, element) -> None:
    element.click()
    WebDriverWait(browser, 60).until(ready.staleness_of(element))
    WebDriverWait(browser, 60).until(ready.presence_of_element_located((By.ID, "main")))


def keys(browser, *pressed: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    for key in pressed:
        ActionChains(browser).send_keys(key).perform()


def said(browser) -> str:
    found = browser.find_elements(By.CSS_SELECTOR, "section.said")
    return found[0].text if found else ""


def vault_git(site, *args) -> str:
    return git(site.vault, *args)


def test_browse_and_page_through_1000_memories_with_keys(browser, site):
    go(browser, site, "/")
    first = listed(browser)
    assert len(first) == 50 and site.ids["marked"] in first[:3]
    shot(browser, "timeline")
    seen, pages = list(first), 1
    while True:
        nxt = browser.find_elements(By.CSS_SELECTOR, "a.next-page")
        if not nxt:
            break
        if pages == 1:  # the keys: j moves to the first line, n turns the page
            keys(browser, "j", "j")
            assert browser.switch_to.active_element.find_element(By.CSS_SELECTOR, "a.text.open").get_attribute(
                "href").endswith(first[1])
            old = browser.find_element(By.ID, "main")
            keys(browser, "n")
            WebDriverWait(browser, 60).until(ready.staleness_of(old))
        else:
            click(browser, nxt[0])
        seen += listed(browser)
        pages += 1
    assert len(seen) == len(set(seen)) == site.ids["listed"] >= MANY  # each once, none left out
    # Filters: one conversation and one kind, each line saying so.
    go(browser, site, "/?conversation=work&kinds=decision")
    kinds = {e.text for e in browser.find_elements(By.CSS_SELECTOR, "li.item .kind")}
    convs = {e.text for e in browser.find_elements(By.CSS_SELECTOR, "li.item a.conversation")}
    assert kinds == {"decision"} and convs == {"work"}


def test_search_with_explain(browser, site):
    go(browser, site, "/search")
    box = browser.find_element(By.ID, "f-query")
    box.send_keys("what does the user drink in the morning")
    old = browser.find_element(By.ID, "main")
    box.submit()
    WebDriverWait(browser, 60).until(ready.staleness_of(old))
    first = browser.find_elements(By.CSS_SELECTOR, "a.text.open")[0]
    assert "green tea" in first.text
    shot(browser, "search")
    go(browser, site, "/search?query=favourite+city&explain=true")
    headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "table.explain th")]
    assert "dense" in headers and "bm25" in headers and "score" in headers


def test_a_memorys_history_shows_its_diff(browser, site):
    go(browser, site, f"/memory/{site.ids['tea']}")
    diff = browser.find_element(By.CSS_SELECTOR, "details.diff[open] pre.patch")
    added = [e.text for e in diff.find_elements(By.CSS_SELECTOR, "span.add")]
    removed = [e.text for e in diff.find_elements(By.CSS_SELECTOR, "span.del")]
    assert "+The user drinks green tea every morning" in added
    assert "-The user drinks tea every morning" in removed
    shot(browser, "memory")


def test_markup_in_a_memory_is_shown_as_text_and_never_runs(browser, site):
    go(browser, site, f"/memory/{site.ids['marked']}")
    assert browser.find_element(By.CSS_SELECTOR, ".memory-text").text == MARKUP
    assert browser.execute_script("return window.pwned === undefined")
    assert not browser.find_elements(By.CSS_SELECTOR, "main b, main img")
    go(browser, site, "/")
    assert browser.execute_script("return window.pwned === undefined")


def test_review_keep_reject_and_edit(browser, site):
    ids = site.ids
    go(browser, site, "/review")
    porto = browser.find_element(By.ID, f"r-{ids['porto']}")
    assert "The user lives in Lisbon" in porto.find_element(By.CSS_SELECTOR, ".old").text  # side by side
    shot(browser, "review")
    # Keep the proposal with the key: j to it, y.
    items = browser.find_elements(By.CSS_SELECTOR, "article.review-item")
    at = [i.get_attribute("id") for i in items].index(f"r-{ids['porto']}")
    for _ in range(at + 1):
        keys(browser, "j")  # to the focused element, as a person's keys go
    assert browser.switch_to.active_element.get_attribute("id") == f"r-{ids['porto']}"
    keys(browser, "k", "j")
    assert browser.switch_to.active_element.get_attribute("id") == f"r-{ids['porto']}"
    old = browser.find_element(By.ID, "main")
    keys(browser, "y")
    WebDriverWait(browser, 60).until(ready.staleness_of(old))
    assert "Kept" in said(browser)
    assert not browser.find_elements(By.ID, f"r-{ids['porto']}")
    go(browser, site, f"/memory/{ids['lisbon']}")
    assert "deleted" in browser.find_element(By.TAG_NAME, "h1").text
    # Reject the learned fact that replaced Rome: Rome is live again.
    go(browser, site, "/review")
    item = browser.find_element(By.ID, f"r-{ids['paris']}")
    item.find_element(By.CSS_SELECTOR, f"#reason-{ids['paris']}").send_keys("I never said that")
    click(browser, item.find_element(By.CSS_SELECTOR, "form[data-key='r'] button"))
    assert "Rejected" in said(browser)
    go(browser, site, f"/memory/{ids['rome']}")
    assert "deleted" not in browser.find_element(By.TAG_NAME, "h1").text
    go(browser, site, f"/memory/{ids['paris']}")
    assert "deleted" in browser.find_element(By.TAG_NAME, "h1").text
    # Edit, then keep.
    go(browser, site, "/review")
    item = browser.find_element(By.ID, f"r-{ids['figs']}")
    item.find_element(By.CSS_SELECTOR, "details.edit-keep summary").click()
    area = item.find_element(By.ID, f"text-{ids['figs']}")
    area.clear()
    area.send_keys("The user loves fresh figs")
    click(browser, item.find_element(By.CSS_SELECTOR, "details.edit-keep button"))
    assert "Kept" in said(browser)
    go(browser, site, f"/memory/{ids['figs']}")
    assert browser.find_element(By.CSS_SELECTOR, ".memory-text").text == "The user loves fresh figs"


def test_edit_is_a_commit_in_git_log_and_undo_takes_it_back(browser, site):
    ids = site.ids
    go(browser, site, f"/memory/{ids['tea']}")
    area = browser.find_element(By.ID, "edit-text")
    area.clear()
    area.send_keys("The user drinks oolong every morning")
    click(browser, browser.find_element(By.CSS_SELECTOR, "form.edit-form button"))
    head = vault_git(site, "log", "-1", "--format=%H %s").strip()
    assert head.split(" ", 1)[1].startswith("memvault edit:")
    assert f"committed {head[:8]}" in said(browser)
    assert browser.find_element(By.CSS_SELECTOR, ".memory-text").text == "The user drinks oolong every morning"
    assert "oolong" in vault_git(site, "show", "HEAD")
    # Undo, from the notice's button.
    click(browser, browser.find_element(By.CSS_SELECTOR, "section.said form button"))
    assert "Took back" in said(browser)
    assert vault_git(site, "log", "-1", "--format=%s").startswith("memvault undo:")
    go(browser, site, f"/memory/{ids['tea']}")
    assert browser.find_element(By.CSS_SELECTOR, ".memory-text").text == "The user drinks green tea every morning"
    go(browser, site, "/changes")
    assert "undo" in browser.find_element(By.CSS_SELECTOR, "ol.history li.item").text
    shot(browser, "changes")


def test_a_change_without_the_csrf_token_is_refused(browser, site):
    ids = site.ids
    go(browser, site, f"/memory/{ids['tea']}")
    before = vault_git(site, "rev-parse", "HEAD")
    # The browser's own form, its token taken out: the page refuses, nothing changes.
    browser.execute_script("document.querySelector('form.remove-form input[name=csrf]').remove()")
    click(browser, browser.find_element(By.CSS_SELECTOR, "form.remove-form button"))
    assert "Refused" in browser.find_element(By.TAG_NAME, "h1").text
    # And a plain POST with no session, as another site's form would send.
    refused = httpx.post(f"{site.url}/memory/{ids['tea']}/remove", data={"reason": "x"}, timeout=60)
    assert refused.status_code == 403
    assert vault_git(site, "rev-parse", "HEAD") == before
    go(browser, site, f"/memory/{ids['tea']}")
    assert "deleted" not in browser.find_element(By.TAG_NAME, "h1").text


def test_conversations(browser, site):
    go(browser, site, "/conversations")
    links = [a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "main a")]
    assert any(link.endswith("/conversations/garden") for link in links)
    go(browser, site, "/conversations/garden")
    assert "garden" in browser.find_element(By.TAG_NAME, "h1").text
    shot(browser, "conversations")


def test_memvault_ui_opens_the_running_serve(site, tmp_path):
    """`memvault ui` with a serve already running for the vault: prints its address, opens it with $BROWSER,
    and ends."""
    opened = tmp_path / "opened"
    fake_browser = tmp_path / "browser.sh"
    fake_browser.write_text(f"#!/bin/sh\necho \"$1\" > {opened}\n")
    fake_browser.chmod(0o755)
    from conftest import memvault_command

    env = {**server_env(tmp_path / "ui", "http://127.0.0.1:9"), "MEMVAULT_DIR": str(site.vault),
           "BROWSER": str(fake_browser)}
    done = subprocess.run([*memvault_command(), "ui"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"the page is at {site.url}/" in done.stdout
    assert opened.read_text().strip() == f"{site.url}/"


def test_readable_at_200_percent_zoom(browser, site):
    """200% zoom of a 1280-pixel window is a 640-CSS-pixel viewport: every page reflows to it, no sideways
    scrolling, and every control keeps its label."""
    size = browser.get_window_size()
    browser.set_window_size(640, 1000)
    try:
        for path in ("/", "/search?query=tea", f"/memory/{site.ids['tea']}", "/review", "/changes", "/conversations"):
            go(browser, site, path)
            assert browser.execute_script(
                "return document.documentElement.scrollWidth <= window.innerWidth + 1"), path
            unlabelled = browser.execute_script("""
                return Array.from(document.querySelectorAll('input:not([type=hidden]), textarea, select'))
                  .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
                  .map(el => el.name);""")
            assert unlabelled == [], (path, unlabelled)
    finally:
        browser.set_window_size(size["width"], size["height"])
