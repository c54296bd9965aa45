import pytest

import dumper.ha.state
from tests.dumper.ha.fakes import MARGIN_S


@pytest.fixture(autouse=True)
def short_lease_margin(monkeypatch):
    monkeypatch.setattr(dumper.ha.state, "LEASE_MARGIN_S", MARGIN_S)
