"""The vault tells the truth about itself (issue 27): `log`, `stats`, `reindex --check`, notices and
hints that are always right.

Each test reproduces a case of the issue as it was seen before the fix:
  1 log hid a sync's merge and its tombstones ....... test_log_shows_a_sync_merge_and_follows_what_it_resolved
  2 log ID said "purged" after a restore ............ test_log_of_a_restored_memory_says_restored
  3 reindex --check drifted after every undo ........ test_undo_leaves_the_index_in_step,
                                                      test_stats_and_check_agree_on_a_hand_edit
  4 the notice about files without front matter ..... test_reindex_gives_front_matter_to_a_note_a_search_read_first
  5 a copied memory file was half-rejected .......... test_a_copied_memory_file_is_left_out_everywhere_alike
  6 rm then undo reverted an uncommitted hand edit .. test_undo_of_rm_keeps_a_hand_edit_made_before_it
  7 --threshold blamed the relevance floor .......... test_an_empty_search_names_what_left_the_candidates_out
  8 export --all -c was accepted .................... test_export_all_and_a_conversation_is_a_usage_error
  9 hints and checks ................................ test_in_progress_hints_run_as_written (and the tests below it)
  10 sync and import details ........................ test_the_same_edit_on_both_machines_is_no_conflict,
                                                      test_reimporting_a_changed_note_updates_it,
                                                      test_yaml_dates_of_a_note_stay_dates
"""

from __future__ import annotations

import json

import memvault
from conftest import git, run_cli, seed


def check(*args: str):
    """`reindex --check` (with these global options)."""
    return run_cli(*args, "reindex", "--check")


def in_step(*args: str) -> bool:
    return json.loads(run_cli(*args, "stats", "--json").stdout)["index"]["in_step"]


# -- 3: undo and the index ------------------------------------------------------------------------

def test_undo_leaves_the_index_in_step(vault_dir):
    """An undo puts files back: they are indexed by the undo itself, so `reindex --check` and `stats`
    agree at once (before, the files put back were left to the next search: drift at every undo)."""
    [bees, anne] = seed("The user keeps bees", "Anne is my wife")
    vault = memvault.open_vault(vault_dir)
    vault.edit(anne.id, "Anne is my wife since 2010")
    for step in (["rm", bees.id], ["undo"], ["undo"]):  # rm, its undo; then the edit's undo
        assert run_cli(*step).exit_code == 0
        done = check()
        assert done.exit_code == 0 and done.stdout == "", (step, done.stdout)
        assert in_step()
    assert run_cli("search", "--json", "bees").stdout.count("The user keeps bees") == 1


def test_stats_and_check_agree_on_a_hand_edit(vault_dir):
    """One answer to "is the index in step": stats said "in step" while reindex --check found a file
    changed by hand (stats compared only the number of rows with the number of files)."""
    [bees] = seed("The user keeps bees")
    bees.path.write_text(bees.path.read_text().replace("bees", "wasps"))
    done = check()
    assert done.exit_code == 1 and done.stdout.startswith("changed ")
    assert not in_step()
    shown = run_cli("stats").stdout
    assert "out of step: 1 changed" in shown and "`memvault reindex` brings it in step" in shown
    assert run_cli("reindex").exit_code == 0  # what the hint says to run
    assert check().exit_code == 0 and in_step()
