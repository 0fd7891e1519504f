"""``fptrack analytics rebuild`` on both backends: a roll-up table that drifted (rows lost, a count changed
behind the triggers' back) is recomputed from the matches."""

from __future__ import annotations

from click.testing import CliRunner
from sqlalchemy import delete, update
from sqlalchemy.orm import Session

from fptrack.analytics.rollups import kept_rollup
from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import MatchRollup
from tests.support.admin_seed import seed
from tests.support.rollups import from_scratch


def test_rebuild_repairs_a_drifted_rollup(settings: Settings) -> None:
    engine = create_engine_for(settings)
    with Session(engine) as session:
        seed(session)
        session.commit()
        expected = from_scratch(session)
        assert expected and kept_rollup(session) == expected
        first = next(iter(expected))
        session.execute(update(MatchRollup).where(MatchRollup.day == first[0]).values(matches=999))
        session.execute(delete(MatchRollup).where(MatchRollup.host == first[2]))
        session.commit()
        assert kept_rollup(session) != expected
    env = {"FPTRACK_DATABASE_URL": settings.database_url, "FPTRACK_DATA_DIR": str(settings.data_dir)}
    result = CliRunner().invoke(main, ["analytics", "rebuild"], env=env)
    assert result.exit_code == 0, result.output
    assert f"rebuilt: {len(expected)} rows (they had drifted)" in result.output
    with Session(engine) as session:
        assert kept_rollup(session) == expected
    again = CliRunner().invoke(main, ["analytics", "rebuild"], env=env)
    assert "(unchanged)" in again.output
    engine.dispose()
