"""GET /internal/v1/health: the verdict and each component's state (justai_memory.edge.health); 503 when database,
embedder or cluster is down, "attention" with its reasons when the service runs but cannot learn."""

from typing import Literal

from ninja import Router, Schema, Status

from justai_memory.api.common import ERRORS
from justai_memory.edge.health import health_report

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
    model: str | None = None  # the embedded provider's: its file name
    model_source: str | None = None  # the embedded model's file: AI_MEMORY_MODEL_FILE, fetched or bundled
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


class ReasonOut(Schema):
    code: str  # stable: database_down, llm_down, conversations_waiting, conversations_failed, nothing_learnt, ...
    text: str  # in the request's language


class HealthOut(Schema):
    status: Literal["ok", "attention", "unavailable"]
    reasons: list[ReasonOut]  # why it is not "ok"; the admin's status page lists the same
    components: ComponentsOut


# The 503 answer is the report itself (which component is down); other errors keep the error shape.
RESPONSES = {200: HealthOut, 503: HealthOut, **{codes - {503}: schema for codes, schema in ERRORS.items()}}


@router.get("/health", response=RESPONSES, url_name="internal-health", exclude_none=True)
def health(request):
    """The database answers, the embedder loads, a job cluster beat within a minute ("unavailable", 503, if not);
    "attention" when the LLM does not answer or conversations wait, failed or taught nothing for a day."""
    body, status = health_report()
    return Status(status, body)
