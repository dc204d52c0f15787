"""Actor strings: the stored values the audit trail and the admin's search name."""

from types import SimpleNamespace

from memories.actors import Actor


def test_each_actor_is_a_kind_and_an_id():
    someone = SimpleNamespace(pk=7)
    assert Actor.admin(someone) == "admin:7"
    assert (Actor.speaker(someone), Actor.speaker(None)) == ("person:7", "tool")
    connection = SimpleNamespace(pk=3)
    assert (Actor.through(connection, someone), Actor.through(connection, None)) == (
        "connection:3/person:7",
        "connection:3/tool",
    )
    assert Actor.through(None, someone) == "person:7"
    assert Actor.job("memory.extract") == "job:memory.extract"
    assert Actor.consolidation(12) == "consolidation:12"
    assert (Actor.event(3), Actor.event(None)) == ("event:3", "event")
    assert (Actor.TOOL, Actor.SCHEDULE, Actor.COMMAND) == ("tool", "schedule", "command")
