import pytest

from fptrack.core.settings import ConfigurationError, Settings


def test_default_is_sqlite_in_data_dir(tmp_path) -> None:
    settings = Settings.from_env({"FPTRACK_DATA_DIR": str(tmp_path)})
    assert settings.database_url == f"sqlite:///{tmp_path}/fptrack.db"
    assert settings.tasks_in_process


def test_postgres_url_uses_psycopg3() -> None:
    settings = Settings.from_env({"FPTRACK_DATABASE_URL": "postgresql://u@127.0.0.1:5432/db"})
    assert settings.database_url.startswith("postgresql+psycopg://")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url", "not a database URL"),
        ("mysql://u@h/db", "unsupported database"),
        ("postgresql://u@127.0.0.1:5432", "names no database"),
    ],
)
def test_malformed_database_url_is_a_clear_error(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Settings.from_env({"FPTRACK_DATABASE_URL": url})


def test_bad_numbers_name_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="FPTRACK_SIMHASH_K"):
        Settings.from_env({"FPTRACK_SIMHASH_K": "three"})
    with pytest.raises(ConfigurationError, match="must be larger"):
        Settings.from_env({"FPTRACK_SIMHASH_K": "4", "FPTRACK_SIMHASH_BLOCKS": "4"})


def test_hot_bucket_settings_are_read_from_the_environment() -> None:
    settings = Settings.from_env({"FPTRACK_SIMHASH_HOT_MU": "1.5", "FPTRACK_SIMHASH_HOT_MIN_SIZE": "4096"})
    assert (settings.simhash_hot_mu, settings.simhash_hot_min_size) == (1.5, 4096)
    assert (Settings().simhash_hot_mu, Settings().simhash_hot_min_size) == (2.0, 1024)
    with pytest.raises(ConfigurationError, match="FPTRACK_SIMHASH_HOT_MIN_SIZE"):
        Settings.from_env({"FPTRACK_SIMHASH_HOT_MIN_SIZE": "many"})


def test_admin_settings_are_read_from_the_environment() -> None:
    default = Settings.from_env({})
    assert default.admin_hosts == ("localhost", "127.0.0.1", "::1")
    # loopback only: http is fine
    assert default.admin_secure_cookies is None and not default.admin_cookies_secure
    assert default.admin_trusted_proxies == () and default.admin_trusted_user_header is None

    settings = Settings.from_env(
        {
            "FPTRACK_ADMIN_HOSTS": " Admin.Example.org , [::1] ",
            "FPTRACK_ADMIN_TRUSTED_PROXIES": "10.0.0.1, 192.168.0.0/16",
            "FPTRACK_ADMIN_TRUSTED_USER_HEADER": "X-Forwarded-User",
        }
    )
    assert settings.admin_hosts == ("admin.example.org", "::1")
    assert settings.admin_cookies_secure  # a public name: Secure unless told otherwise
    assert settings.admin_trusted_proxies == ("10.0.0.1", "192.168.0.0/16")
    assert settings.admin_trusted_user_header == "X-Forwarded-User"

    assert not Settings.from_env(
        {"FPTRACK_ADMIN_HOSTS": "admin.example.org", "FPTRACK_ADMIN_SECURE_COOKIES": "false"}
    ).admin_cookies_secure
    assert Settings.from_env({"FPTRACK_ADMIN_SECURE_COOKIES": "true"}).admin_cookies_secure
    assert Settings.from_env({"FPTRACK_ADMIN_SECURE_COOKIES": "auto"}).admin_secure_cookies is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FPTRACK_ADMIN_SECURE_COOKIES": "sometimes"}, "FPTRACK_ADMIN_SECURE_COOKIES"),
        ({"FPTRACK_ADMIN_TRUSTED_PROXIES": "proxy.local"}, "not an IP address or network"),
        ({"FPTRACK_ADMIN_TRUSTED_USER_HEADER": "X-Forwarded-User"}, "needs FPTRACK_ADMIN_TRUSTED_PROXIES"),
        ({"FPTRACK_ADMIN_HOSTS": " , "}, None),  # empty means the default
    ],
)
def test_bad_admin_settings_name_the_variable(env: dict[str, str], message: str | None) -> None:
    if message is None:
        assert Settings.from_env(env).admin_hosts == ("localhost", "127.0.0.1", "::1")
        return
    with pytest.raises(ConfigurationError, match=message):
        Settings.from_env(env)
