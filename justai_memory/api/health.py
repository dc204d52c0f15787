"""GET /internal/v1/health: each component's state (justai_memory.serving.health); 503 when database, embedder or cluster is down."""

from typing import Literal

from ninja import Router, Schema, Status

from justai_memory.api.common import ERRORS
from justai_memory.serving.health import health_report

router = Router(tags=["health"])


class DatabaseOut(Schema):
    ok: bool
    error: str | None = None


class EmbedderOut(Schema):
    ok: bool
    name: str | None = None
    dim: int | None = None
    error: str | None = None


class ClusterOut(Schema):
    ok: bool
    clusters: int | None = None
    heartbeat_age_seconds: float | None = None
    error: str | None = None


class ExtractionOut(Schema):
    ok: bool
    running: int | None = None
    stalled: list[int] | None = None
    error: str | None = None


class LlmOut(Schema):
    role: str
    provider: str | None = None
    base_url: str | None = None
    model: str | None = None
    location: str | None = None
    ok: bool
    model_listed: bool | None = None
    error: str | None = None
    conversations_waiting: int | None = None  # ended conversations waiting for this model to answer
    hint: str | None = None  # when it does not answer: what to start or set


class ComponentsOut(Schema):
    database: DatabaseOut
    embedder: EmbedderOut
    cluster: ClusterOut
    extraction: ExtractionOut
    llm: LlmOut


class HealthOut(Schema):
    status: Literal["ok", "unavailable"]
    components: ComponentsOut


# The 503 answer is the report itself (which component is down); other errors keep the error shape.
RESPONSES = {200: HealthOut, 503: HealthOut, **{codes - {503}: schema for codes, schema in ERRORS.items()}}


@router.get("/health", response=RESPONSES, url_name="internal-health", exclude_none=True)
def health(request):
    """The database answers, the embedder loads, a job cluster beat within a minute; the LLM provider is reported."""
    body, status = health_report()
    return Status(status, body)
