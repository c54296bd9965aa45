import pytest

import dumper.ha.ha_node
from tests.dumper.ha.fakes import MARGIN_S


@pytest.fixture(autouse=True)
def short_lease_margin(monkeypatch):
    monkeypatch.setattr(dumper.ha.ha_node, "LEASE_MARGIN_S", MARGIN_S)
