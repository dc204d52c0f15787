"""One row under concurrency: parallel stores of the same content through the running server end as one memory,
a forget removes every copy the speaker may see, and a forget racing a remember ends in one of their serial orders."""

import threading

import pytest
import requests

from memories.models import Memory, Provenance, Scope, Source, Tombstone
from memories.services.store import MemoryDraft, memory_store_batch
from people.tests.factories import PersonFactory, RoomFactory

CONTENT = "Der Code für das Gartentor ist 4711."


def post(url: str, token: str, path: str, body: dict) -> requests.Response:
    return requests.post(f"{url}{path}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def in_parallel(calls) -> list:
    """Run the calls at once (a barrier releases every thread together); their results, in order."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def run(index, call):
        barrier.wait()
        try:
            results[index] = call()
        except Exception as exc:  # reported by the assertion below, not swallowed
            results[index] = exc

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("copies", [2, 8])
def test_parallel_identical_remembers_make_one_memory(live_server, api_token, copies):
    room = RoomFactory()
    responses = in_parallel(
        [
            lambda: post(
                live_server.url,
                api_token,
                "/internal/v1/memories/remember",
                {"content": CONTENT, "room_id": room.pk, "language": "de"},
            )
            for _ in range(copies)
        ]
    )
    assert all(r.status_code == 201 for r in responses), responses
    assert Memory.objects.filter(content=CONTENT).count() == 1
    memory = Memory.objects.get()
    assert memory.occurrences == copies
    assert sorted(r.json()["outcome"] for r in responses) == ["created"] + ["merged"] * (copies - 1)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_remember_observe_and_extraction_batches_in_any_mix_make_one_memory_per_scope(live_server, api_token):
    room, anna = RoomFactory(), PersonFactory()
    near = "der Code für das Gartentor ist 4711!"  # near-identical: above the duplicate threshold, same numbers

    def remember(content, **extra):
        return lambda: post(
            live_server.url,
            api_token,
            "/internal/v1/memories/remember",
            {"content": content, "room_id": room.pk, "language": "de", **extra},
        )

    def observe(content):
        return lambda: post(
            live_server.url, api_token, "/internal/v1/memories/observe", {"content": content, "language": "de"}
        )

    def batch(*scopes):
        drafts = [
            MemoryDraft(
                content=CONTENT,
                language="de",
                provenance=Provenance.EXTRACTED,
                source=Source.SESSION,
                scope=scope,
                owner=anna if scope == Scope.PRIVATE else None,
            )
            for scope in scopes
        ]

        def run():
            from django.db import connection

            try:
                return memory_store_batch(drafts=drafts, actor="job:extract")
            finally:
                connection.close()

        return run

    calls = [
        remember(CONTENT),
        remember(near),
        observe(CONTENT),
        observe(near),
        batch(Scope.SHARED, Scope.PRIVATE),
        batch(Scope.PRIVATE, Scope.SHARED),
        remember(CONTENT, scope="private", speaker_id=anna.pk),
        remember(near, scope="private", speaker_id=anna.pk),
    ]
    results = in_parallel(calls)
    assert not [r for r in results if isinstance(r, Exception)], results
    assert Memory.objects.filter(scope=Scope.SHARED).count() == 1
    assert Memory.objects.filter(scope=Scope.PRIVATE, owner=anna).count() == 1
    assert sum(Memory.objects.values_list("occurrences", flat=True)) == 10


FORGET_REMEMBER_TRIALS = 12


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scope", ["shared", "private"])
def test_forget_racing_remember_of_the_same_fact_ends_in_a_serial_order(live_server, api_token, scope):
    """Forget (confirmed) and remember of one fact sent at once, many times: the end state is always one of
    the two serial orders: remember then forget (no memory, one block) or forget then remember (the memory,
    its block lifted). Never the memory beside a block it did not lift."""
    room, anna = RoomFactory(), PersonFactory()
    who = {"room_id": room.pk, "speaker_id": anna.pk}
    remember = {"content": CONTENT, "language": "de", "scope": scope, **who}
    orders = []
    for _ in range(FORGET_REMEMBER_TRIALS):
        Memory.objects.all().delete()
        Tombstone.objects.all().delete()
        assert post(live_server.url, api_token, "/internal/v1/memories/remember", remember).status_code == 201
        found = post(
            live_server.url,
            api_token,
            "/internal/v1/memories/find_to_forget",
            {"query": "Vergiss den Code für das Gartentor", "model_location": "local", **who},
        ).json()
        assert len(found["candidates"]) == 1, found
        forgot, remembered = in_parallel(
            [
                lambda t=found["token"]: post(
                    live_server.url,
                    api_token,
                    "/internal/v1/memories/forget",
                    {"token": t, "confirm": True, "speaker_id": anna.pk},
                ),
                lambda: post(live_server.url, api_token, "/internal/v1/memories/remember", remember),
            ]
        )
        assert forgot.status_code == 200 and remembered.status_code == 201, (forgot.json(), remembered.json())
        end = (Memory.objects.filter(content=CONTENT).count(), Tombstone.objects.count())
        if remembered.json()["lifted_blocks"]:
            assert end == (1, 0), "forget, then remember: the memory is back and its block lifted"
            orders.append("forget first")
        else:
            assert remembered.json()["outcome"] == "merged" and end == (0, 1), (remembered.json(), end)
            orders.append("remember first")
    assert len(orders) == FORGET_REMEMBER_TRIALS
