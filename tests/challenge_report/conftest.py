from __future__ import annotations

import pytest

from .world import World, world_make


@pytest.fixture
def world(db: None) -> World:
    return world_make()
