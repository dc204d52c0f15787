"""A second HNSW graph over the memories' sign bits, where consolidation searches again what the first one lost.

pgvector's ``binary_quantize`` keeps one bit per dimension (its sign); the index orders by Hamming
distance between those bits. It is no substitute for the vector index when ranking by meaning, but
near-identical memories (similarity >= the duplicate threshold) differ in few bits, and its graph is
built independently of the vector index's: at 100k memories 7 % of the vector index's self-searches
at ef_search 16 end in the wrong part of its graph, and 9 in 10 of those are found here at the cost
of a plain search (bench/consolidate.py). 512 dimensions take 64 bytes a memory (~35 MB at 100k).

The bit length is part of the index expression, so the index is built for the column's dimension
by migration 0006 and rebuilt by ``reembed_memories``; queries must use ``expression`` with the
same dimension or PostgreSQL will not use the index.
"""

NAME = "memory_embedding_bq"


def expression(alias: str, dim: int) -> str:
    """The indexed expression for the table alias ``alias`` (e.g. ``binary_quantize(c.embedding)::bit(512)``)."""
    return f"binary_quantize({alias}.embedding)::bit({int(dim)})"


def create(cursor, *, dim: int) -> None:
    """Build the index for vectors of ``dim`` dimensions (no-op when it exists)."""
    cursor.execute(
        f"CREATE INDEX IF NOT EXISTS {NAME} ON memories_memory USING hnsw "
        f"(({expression('memories_memory', dim)}) bit_hamming_ops) WITH (m = 16, ef_construction = 64)"
    )


def drop(cursor) -> None:
    cursor.execute(f"DROP INDEX IF EXISTS {NAME}")
