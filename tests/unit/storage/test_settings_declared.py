"""The settings' declarations: every field declared once, the generated docs and example file as the code
gives them, each default readable back from its variable, and from_env's parsing of each kind of value."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fptrack.core.settings import ConfigurationError, Settings, declared_settings
from fptrack.core.settings_files import ROOT, env_value, generated_files

DECLARED = list(declared_settings())
BY_VARIABLE = {meta.variable: (item, meta) for item, meta in DECLARED}


def _read_env_file(text: str) -> dict[str, str]:
    pairs = (line.partition("=") for line in text.splitlines() if line and not line.startswith("#"))
    return {key: value for key, _, value in pairs}


def test_every_field_is_declared_once_with_a_variable_and_a_meaning() -> None:
    assert [item.name for item, _ in DECLARED] == [item.name for item in dataclasses.fields(Settings)]
    variables = [meta.variable for _, meta in DECLARED]
    assert len(set(variables)) == len(variables) == len(dataclasses.fields(Settings))
    for _, meta in DECLARED:
        assert meta.variable.startswith("FPTRACK_") and meta.variable.isupper(), meta.variable
        assert meta.doc and "|" not in meta.doc and "\n" not in meta.doc, meta.variable


@pytest.mark.parametrize("path", sorted(generated_files(), key=str), ids=str)
def test_generated_files_are_what_the_declarations_give(path: Path) -> None:
    """docs/settings.md and deploy/.env.example never disagree with the code: rewrite them with
    ``python -m fptrack.core.settings_files --write``."""
    assert (ROOT / path).read_text(encoding="utf-8") == generated_files()[path], (
        f"{path} differs from core/settings.py: run python -m fptrack.core.settings_files --write"
    )


def test_the_docs_state_each_default_the_code_has() -> None:
    table = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    defaults = Settings()
    for item, meta in DECLARED:
        row = next(line for line in table.splitlines() if line.startswith(f"| `{meta.variable}` |"))
        shown = row.split(" | ")[1]
        if meta.shown is not None:
            assert shown == meta.shown
            continue
        value = env_value(getattr(defaults, item.name))
        assert shown == (f"`{value}`" if value else "unset"), meta.variable
    assert "| `FPTRACK_RECHECK_EVERY` | `60` |" in table


@pytest.mark.parametrize(
    "variable",
    # a default in words depends on other settings or on the machine (test_the_docs_state_each_default...)
    sorted(v for v, (_, meta) in BY_VARIABLE.items() if meta.shown is None and meta.fallback is None),
)
def test_each_default_read_back_from_its_variable_is_the_default(variable: str) -> None:
    item, _ = BY_VARIABLE[variable]
    default = getattr(Settings(), item.name)
    written = env_value(default)
    if not written:
        assert Settings.from_env({variable: ""}) == Settings.from_env({})  # empty: the default
        return
    assert getattr(Settings.from_env({variable: written}), item.name) == default


def test_the_example_file_sets_values_the_settings_accept() -> None:
    text = (ROOT / "deploy" / ".env.example").read_text(encoding="utf-8")
    active = {key: value for key, value in _read_env_file(text).items() if key.startswith("FPTRACK_")}
    assert set(active) == {
        "FPTRACK_DATABASE_URL",
        "FPTRACK_BROKER_URL",
        "FPTRACK_TASK_QUEUE",
        "FPTRACK_ADMIN_HOSTS",
    }
    settings = Settings.from_env(active)
    assert settings.database_url.startswith("postgresql+psycopg://") and not settings.tasks_in_process
    # every variable is there, set or commented out, and every line uncommented at once is accepted
    shown = _read_env_file(
        "\n".join(line.lstrip("#") for line in text.splitlines() if line.startswith("#FPTRACK_"))
    )
    assert set(shown) | set(active) == set(BY_VARIABLE)
    Settings.from_env({**shown, **active})


INTEGERS = [v for v, (item, _) in BY_VARIABLE.items() if item.type == "int"]
NUMBERS = [v for v, (item, _) in BY_VARIABLE.items() if item.type in ("float", "float | None")]
SWITCHES = [v for v, (item, _) in BY_VARIABLE.items() if item.type == "bool"]


@given(st.sampled_from(INTEGERS + NUMBERS), st.integers(min_value=-(10**6), max_value=10**7))
def test_numbers_are_read_or_refused_with_the_variable_named(variable: str, number: int) -> None:
    item, meta = BY_VARIABLE[variable]
    try:
        settings = Settings.from_env({variable: str(number)})
    except ConfigurationError as error:
        message = str(error)
        assert variable in message and "\n" not in message
        bound = meta.at_least or meta.above
        assert (
            bound is None
            or "out of range" in message
            or variable.startswith(("FPTRACK_SIMHASH", "FPTRACK_PAGE"))
        )
        return
    assert getattr(settings, item.name) == number
    if meta.at_least is not None:
        assert number >= meta.at_least[0]
    if meta.above is not None:
        assert number > meta.above[0]


@given(st.sampled_from(INTEGERS + NUMBERS + SWITCHES), st.sampled_from(["three", "1.5.2", "x1", "true-ish"]))
def test_malformed_values_are_one_line_naming_the_variable(variable: str, raw: str) -> None:
    item, _ = BY_VARIABLE[variable]
    with pytest.raises(ConfigurationError) as caught:
        Settings.from_env({variable: raw})
    kind = {"int": "an integer", "bool": "a boolean"}.get(item.type, "a number")
    assert str(caught.value).startswith(f"{variable}={raw!r} is not {kind}")


@given(
    st.sampled_from(SWITCHES),
    st.sampled_from(["1", "true", "YES", " on ", "0", "false", "No", "off"]),
)
def test_switches_read_the_usual_spellings(variable: str, raw: str) -> None:
    item, _ = BY_VARIABLE[variable]
    expected = raw.strip().lower() in ("1", "true", "yes", "on")
    assert getattr(Settings.from_env({variable: raw}), item.name) is expected


@given(st.lists(st.sampled_from(["a.example", " b.example:8080", "10.0.0.0/8", " ", ""]), max_size=5))
def test_lists_are_comma_separated_and_trimmed(items: list[str]) -> None:
    settings = Settings.from_env({"FPTRACK_ALLOW_PRIVATE_HOSTS": ",".join(items)})
    assert settings.allow_private_hosts == tuple(dict.fromkeys(i.strip() for i in items if i.strip()))


def test_unset_and_empty_keep_the_defaults_and_the_cache_folder_follows_xdg(tmp_path: Path) -> None:
    empty = {meta.variable: "" for _, meta in DECLARED if not meta.empty_is_value}
    assert Settings.from_env(empty) == Settings.from_env({})
    assert Settings.from_env({"XDG_CACHE_HOME": str(tmp_path)}).cache_dir == tmp_path / "fptrack"
    assert Settings.from_env({"FPTRACK_CACHE_DIR": ""}).cache_dir is None  # set but empty: no cache
    assert Settings().cache_dir is None


def test_bounds_refuse_values_on_the_wrong_side() -> None:
    with pytest.raises(
        ConfigurationError, match=r"^FPTRACK_CRAWL_TIMEOUT=0 is out of range: expected seconds > 0$"
    ):
        Settings.from_env({"FPTRACK_CRAWL_TIMEOUT": "0"})
    with pytest.raises(ConfigurationError, match="FPTRACK_SITE_RATE=nan is out of range"):
        Settings.from_env({"FPTRACK_SITE_RATE": "nan"})
    with pytest.raises(ConfigurationError, match=r"FPTRACK_CRAWL_STALE_SECONDS=4 .* >= 5"):
        Settings.from_env({"FPTRACK_CRAWL_STALE_SECONDS": "4"})
    assert Settings.from_env({"FPTRACK_CRAWL_STALE_SECONDS": "5"}).crawl_stale_seconds == 5
    assert math.isclose(Settings.from_env({"FPTRACK_SITE_RATE": "0.25"}).site_rate, 0.25)


def test_the_password_never_shows_in_the_settings_repr() -> None:
    settings = Settings.from_env({"FPTRACK_SMTP_PASSWORD": "hunter2"})
    assert settings.smtp_password == "hunter2" and "hunter2" not in repr(settings)
