"""Secrets never show where settings are shown: ``repr(Settings)`` (in a traceback's locals, a debug log, the
admin's state) leaves out the SMTP password and the search API keys and masks every URL's password, and a
malformed database URL is refused with its password masked."""

from __future__ import annotations

import pytest

from fptrack.core.settings import ConfigurationError, Settings, without_password

SECRET = "s3cr3t-Pa55"


def test_the_settings_repr_shows_no_secret() -> None:
    settings = Settings.from_env(
        {
            "FPTRACK_DATABASE_URL": f"postgresql://fptrack:{SECRET}@127.0.0.1:5432/fptrack",
            "FPTRACK_READ_DATABASE_URL": f"postgresql://reader:{SECRET}@127.0.0.1:5433/fptrack",
            "FPTRACK_BROKER_URL": f"amqp://guest:{SECRET}@127.0.0.1:5672//",
            "FPTRACK_RESULT_BACKEND": f"redis://:{SECRET}@127.0.0.1:6379/0",
            "FPTRACK_SEARCH_BRAVE_KEY": f"brave-{SECRET}",
            "FPTRACK_SEARCH_SEARXNG_URL": f"https://me:{SECRET}@searx.example.org/",
            "FPTRACK_SEARCH_GOOGLE_KEY": f"google-{SECRET}",
            "FPTRACK_SEARCH_SERPAPI_KEY": f"serpapi-{SECRET}",
            "FPTRACK_SMTP_PASSWORD": SECRET,
        }
    )
    shown = repr(settings)
    assert SECRET not in shown
    assert "postgresql+psycopg://fptrack:***@127.0.0.1:5432/fptrack" in shown
    assert "amqp://guest:***@127.0.0.1:5672//" in shown
    # the values themselves are intact
    assert settings.database_url == f"postgresql+psycopg://fptrack:{SECRET}@127.0.0.1:5432/fptrack"
    assert settings.search_serpapi_key == f"serpapi-{SECRET}"
    assert "https://me:***@searx.example.org/" in shown


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://fptrack:{SECRET}@127.0.0.1:5432",  # names no database
        f"mysql://fptrack:{SECRET}@127.0.0.1/fptrack",  # unsupported
        f"postgres//fptrack:{SECRET}@127.0.0.1/fptrack",  # not a URL
    ],
)
def test_a_refused_database_url_is_named_without_its_password(url: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Settings.from_env({"FPTRACK_DATABASE_URL": url})
    message = str(caught.value)
    assert message.startswith("FPTRACK_DATABASE_URL=") and SECRET not in message and "***" in message


def test_a_url_without_a_password_is_shown_as_it_is() -> None:
    for url in ("https://api.bing.microsoft.com/v7.0/search?x=1", "sqlite:///fptrack-data/fptrack.db", "a b"):
        assert without_password(url) == url
