"""Settings: defaults < memvault.toml < MEMVAULT_* < flags, with clear errors."""

import pytest

from conftest import run_cli
from memvault.store.config import Settings, load_settings
from memvault.errors import SettingsError


def test_precedence(tmp_path):
    (tmp_path / "memvault.toml").write_text("default_top_k = 7\nmmr_lambda = 0.5\nrecency_weight = 0.1\n")
    settings = load_settings(tmp_path, {"MEMVAULT_MMR_LAMBDA": "0.6", "MEMVAULT_RECENCY_WEIGHT": "0.3"},
                             {"recency_weight": 0.4})
    assert (settings.default_top_k, settings.mmr_lambda, settings.recency_weight) == (7, 0.6, 0.4)
    assert load_settings(None, {}) == Settings()


@pytest.mark.parametrize("toml, message", [
    ("mmr_lambda = 3\n", "invalid value 3 for setting 'mmr_lambda' in {path}: must be between 0.0 and 1.0"),
    ("top_kk = 3\n", "unknown setting 'top_kk' in {path}"),
    ("default_top_k = 'many'\n", "invalid value 'many' for setting 'default_top_k' in {path}: expected an integer"),
    ("enable_git_versioning = 'maybe'\n", "expected true or false"),
    ("llm_api_key = 'sk-secret'\n", "'llm_api_key' must not be stored in memvault.toml"),
    ("mmr_lambda = \n", "not valid TOML"),
])
def test_bad_settings_name_the_key_and_file(tmp_path, toml, message):
    path = tmp_path / "memvault.toml"
    path.write_text(toml)
    with pytest.raises(SettingsError) as excinfo:
        load_settings(tmp_path, {})
    assert message.format(path=path) in str(excinfo.value)
    assert "sk-secret" not in str(excinfo.value)


def test_bad_environment_value_names_the_variable():
    with pytest.raises(SettingsError, match="MEMVAULT_MAX_ENTRIES"):
        load_settings(None, {"MEMVAULT_MAX_ENTRIES": "-4"})


def test_cli_reports_bad_settings_as_usage_error(vault_dir, monkeypatch):
    monkeypatch.setenv("MEMVAULT_DEFAULT_TOP_K", "zero")
    result = run_cli("add", "x")
    assert result.exit_code == 2
    assert "MEMVAULT_DEFAULT_TOP_K" in result.stderr and result.stderr.count("\n") == 1


def test_vault_location_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMVAULT_DIR", raising=False)
    assert run_cli("add", "to xdg").exit_code == 0
    assert (tmp_path / "home/.local/share/memvault/entries/global/facts").is_dir()
    monkeypatch.setenv("MEMVAULT_DIR", str(tmp_path / "env-vault"))
    assert run_cli("add", "to env").exit_code == 0
    assert (tmp_path / "env-vault/entries").is_dir()
    assert run_cli("--vault", str(tmp_path / "flag-vault"), "add", "to flag").exit_code == 0
    assert (tmp_path / "flag-vault/entries").is_dir()
