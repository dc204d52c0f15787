"""The household's admin for memories: search by meaning, edit, add notes, preview recall, consolidate, settings.

Admin classes parse, call one service or selector, and present. Services from other parts of the
project (recall, consolidation) are imported inside the views that call them.
"""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.views.main import ORDER_VAR
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Case, F, IntegerField, Value, When
from django.db.models.functions import Coalesce
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from justai_memory.errors import ApplicationError
from memories.limits import MAX_TEXT_CHARS
from memories.models import (
    PROVENANCE_LABELS,
    AuditEvent,
    ConsolidationRun,
    EmbeddingSpace,
    Memory,
    MemorySettings,
    Provenance,
    Scope,
    Status,
    Tombstone,
)
from memories.selectors.search import memories_search
from memories.selectors.tombstones import tombstone_hits
from memories.services.edit import EDITABLE_FIELDS, NOTE_BLOCKED, memory_edit, memory_note_add
from memories.services.embeddings import active_embedder
from memories.services.forget import memories_forget, tombstone_lift
from memories.services.store import StoreOutcome
from people.models import Person, Room
from transcripts.models import Conversation

RECALL_UNAVAILABLE = "Recall is not available in this build (memories.selectors.recall is missing)."
CONSOLIDATION_UNAVAILABLE = "Consolidation is not available in this build (memories.services.consolidate is missing)."


def admin_actor(request) -> str:
    """How the audit trail names an admin user."""
    return f"admin:{request.user.pk}"


def memory_link(pk: int) -> str:
    return format_html('<a href="{}">#{}</a>', reverse("admin:memories_memory_change", args=[pk]), pk)


# --- list filters -------------------------------------------------------------------------------


class ScoreBandFilter(admin.SimpleListFilter):
    """Low / medium / high bands of a 0..1 score."""

    bands = {"low": (0.0, 1 / 3), "medium": (1 / 3, 2 / 3), "high": (2 / 3, 1.01)}

    def lookups(self, request, model_admin):
        return [("low", "low (< 0.33)"), ("medium", "medium"), ("high", "high (≥ 0.67)")]

    def queryset(self, request, queryset):
        if self.value() not in self.bands:
            return queryset
        low, high = self.bands[self.value()]
        return queryset.filter(**{f"{self.parameter_name}__gte": low, f"{self.parameter_name}__lt": high})


class ConfidenceFilter(ScoreBandFilter):
    title = "confidence"
    parameter_name = "confidence"


class ImportanceFilter(ScoreBandFilter):
    title = "importance"
    parameter_name = "importance"


class AccessCountFilter(admin.SimpleListFilter):
    title = "access count"
    parameter_name = "recalled"

    def lookups(self, request, model_admin):
        return [("never", "never recalled"), ("yes", "recalled")]

    def queryset(self, request, queryset):
        if self.value() == "never":
            return queryset.exclude(access__count__gt=0)
        if self.value() == "yes":
            return queryset.filter(access__count__gt=0)
        return queryset


class LabelFilter(admin.SimpleListFilter):
    """Provenance under the names the assistant is told (confirmed / observed / from conversation / GUESS)."""

    title = "label"
    parameter_name = "provenance"

    def lookups(self, request, model_admin):
        return [(value, PROVENANCE_LABELS[value]) for value in Provenance.values]

    def queryset(self, request, queryset):
        if self.value() in Provenance.values:
            return queryset.filter(provenance=self.value())
        return queryset


# --- forms --------------------------------------------------------------------------------------


class ScopeFormMixin:
    """Clear owner and room where the scope has none, so switching scope needs one change, not three."""

    def clean(self):
        cleaned = super().clean()
        scope = cleaned.get("scope")
        if scope and scope != Scope.PRIVATE:
            cleaned["owner"] = None
        if scope and scope != Scope.ROOM:
            cleaned["room"] = None
        return cleaned


class MemoryChangeForm(ScopeFormMixin, forms.ModelForm):
    class Meta:
        model = Memory
        fields = EDITABLE_FIELDS


class MemoryNoteForm(ScopeFormMixin, forms.ModelForm):
    """Add a note (kind note, source admin, confirmed); refused when a forget block covers it."""

    class Meta:
        model = Memory
        fields = ["content", "language", "scope", "owner", "room", "about", "importance"]
        widgets = {"content": forms.Textarea(attrs={"rows": 4, "maxlength": MAX_TEXT_CHARS})}

    embedding = None

    def clean(self):
        cleaned = super().clean()
        content = cleaned.get("content")
        if content:
            embedder = active_embedder()
            self.embedding = embedder.embed_documents([content])[0]
            blocking = tombstone_hits(content=content, embedding=self.embedding, embedder=embedder)
            if blocking:
                ids = ", ".join(f"#{pk}" for pk in blocking)
                self.add_error("content", NOTE_BLOCKED.format(ids=ids))
        return cleaned


class RecallPreviewForm(forms.Form):
    speaker = forms.ModelChoiceField(
        Person.objects.all(), required=False, empty_label="unknown speaker", help_text="Who asks."
    )
    room = forms.ModelChoiceField(Room.objects.all(), help_text="Where the question is asked.")
    query = forms.CharField(
        label="Question", max_length=MAX_TEXT_CHARS, widget=forms.TextInput(attrs={"size": 80, "autofocus": True})
    )
    conversation = forms.IntegerField(
        required=False,
        min_value=1,
        help_text="Optional conversation id: its model location (cloud or local) and its working memory apply.",
    )
    limit = forms.IntegerField(min_value=1, max_value=50, initial=10)

    def clean_conversation(self):
        pk = self.cleaned_data.get("conversation")
        if pk is None:
            return None
        try:
            return Conversation.objects.get(pk=pk)
        except Conversation.DoesNotExist:
            raise forms.ValidationError(f"No conversation with id {pk}.") from None


def recalled_row(item) -> dict:
    """One recalled memory as the preview shows it: a Memory, a wrapper with ``.memory`` and ``.score``, or a dict."""

    def get(source, name):
        return source.get(name) if isinstance(source, dict) else getattr(source, name, None)

    memory = get(item, "memory") or item
    return {
        "id": get(memory, "id") or get(memory, "pk"),
        "content": get(memory, "content"),
        "label": get(memory, "label"),
        "scope": get(memory, "scope"),
        "language": get(memory, "language"),
        "score": get(item, "score") if get(item, "score") is not None else get(memory, "score"),
    }


# --- memories -----------------------------------------------------------------------------------


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "content_preview",
        "kind",
        "label",
        "scope_with_owner",
        "language",
        "status_with_successor",
        "confidence",
        "importance",
        "access_count",
        "last_accessed_at",
    ]
    list_display_links = ["id", "content_preview"]
    list_filter = [
        "kind",
        LabelFilter,
        "scope",
        ("owner", admin.RelatedOnlyFieldListFilter),
        ("room", admin.RelatedOnlyFieldListFilter),
        "language",
        "status",
        ConfidenceFilter,
        ImportanceFilter,
        AccessCountFilter,
        "access__last_accessed_at",
        "source",
    ]
    list_select_related = ["owner", "room", "access"]
    list_per_page = 50
    # The stock search needs a field to show its box; get_search_results replaces it with the hybrid search.
    search_fields = ["content"]
    search_help_text = "Searches by meaning and by words: 'Schlüssel' finds 'key', '4711' finds the gate code."
    exclude = ["embedding"]
    form = MemoryChangeForm
    add_form = MemoryNoteForm
    readonly_fields = [
        "source",
        "source_ref",
        "occurrences",
        "access_count",
        "last_accessed_at",
        "status",
        "superseded_by_link",
        "supersedes_links",
        "created_at",
        "updated_at",
        "audit_trail",
    ]
    fieldsets = [
        (None, {"fields": ["content", "language", "kind"]}),
        ("Origin", {"fields": ["provenance", "confidence", "importance", "source", "source_ref", "occurrences"]}),
        ("Who sees it", {"fields": ["scope", "owner", "room", "about"]}),
        ("Contradictions", {"fields": ["subject", "predicate", "status", "superseded_by_link", "supersedes_links"]}),
        ("Dates and use", {"fields": ["valid_at", "created_at", "updated_at", "access_count", "last_accessed_at"]}),
        ("History", {"fields": ["audit_trail"]}),
    ]
    add_fieldsets = [
        (
            None,
            {
                "fields": ["content", "language", "scope", "owner", "room", "about", "importance"],
                "description": "A note is stored as kind 'note', source 'admin', provenance 'confirmed'. "
                "When it duplicates a memory of the same scope, the two are merged.",
            },
        )
    ]

    def get_queryset(self, request):
        # Vectors and the full-text column are large and never shown.
        return super().get_queryset(request).defer("embedding", "search_vector")

    # Deleting in the admin is forgetting: a text-less tombstone stays and blocks the content's return.
    def delete_model(self, request, obj):
        memories_forget(memory_ids=[obj.pk], actor=admin_actor(request), by_user=request.user)

    def delete_queryset(self, request, queryset):
        memories_forget(
            memory_ids=list(queryset.values_list("pk", flat=True)), actor=admin_actor(request), by_user=request.user
        )

    def get_search_results(self, request, queryset, search_term):
        """The hybrid search (meaning and words) over the filtered list, best match first."""
        if not search_term.strip():
            return queryset, False
        ids = memories_search(query=search_term, queryset=queryset)
        if not ids:
            return queryset.none(), False
        found = queryset.filter(pk__in=ids)
        if request.GET.get(ORDER_VAR):
            return found, False  # a column the admin chose to sort by wins
        rank = Case(*(When(pk=pk, then=position) for position, pk in enumerate(ids)), output_field=IntegerField())
        return found.annotate(search_rank=rank).order_by("search_rank", "-pk"), False

    # list columns

    @admin.display(description="content", ordering="content")
    def content_preview(self, obj):
        return Truncator(obj.content).chars(100)

    @admin.display(description="label", ordering="provenance")
    def label(self, obj):
        return obj.label

    # Never recalled (no MemoryAccess row) sorts as 0 / as the oldest access.
    @admin.display(description="access count", ordering=Coalesce("access__count", Value(0)))
    def access_count(self, obj):
        return obj.access_count

    @admin.display(description="last accessed", ordering=F("access__last_accessed_at").asc(nulls_first=True))
    def last_accessed_at(self, obj):
        return obj.last_accessed_at

    @admin.display(description="scope", ordering="scope")
    def scope_with_owner(self, obj):
        if obj.scope == Scope.PRIVATE:
            return f"private · {obj.owner}"
        if obj.scope == Scope.ROOM:
            return f"room · {obj.room}"
        return obj.scope

    @admin.display(description="status", ordering="status")
    def status_with_successor(self, obj):
        if obj.status == Status.SUPERSEDED and obj.superseded_by_id:
            return format_html("superseded by {}", memory_link(obj.superseded_by_id))
        return obj.get_status_display()

    # read-only fields of the change page

    @admin.display(description="superseded by")
    def superseded_by_link(self, obj):
        if not obj.superseded_by_id:
            return "-"
        successor = Memory.objects.only("pk", "content").get(pk=obj.superseded_by_id)
        return format_html("{}: {}", memory_link(successor.pk), Truncator(successor.content).chars(120))

    @admin.display(description="supersedes")
    def supersedes_links(self, obj):
        older = Memory.objects.filter(superseded_by=obj).only("pk", "content").order_by("-valid_at")
        if not older:
            return "-"
        return format_html_join(
            "",
            "<div>{}: {}</div>",
            ((memory_link(m.pk), Truncator(m.content).chars(120)) for m in older),
        )

    @admin.display(description="audit trail")
    def audit_trail(self, obj):
        events = AuditEvent.objects.filter(memory_id=obj.pk)[:20]
        if not events:
            return "-"
        url = reverse("admin:memories_auditevent_changelist") + f"?memory_id={obj.pk}"
        rows = format_html_join(
            "",
            "<div>{} · {} · {}{}</div>",
            (
                (
                    e.created_at.strftime("%Y-%m-%d %H:%M"),
                    e.get_action_display(),
                    e.actor,
                    format_html(" (with {})", memory_link(e.related_memory_id)) if e.related_memory_id else "",
                )
                for e in events
            ),
        )
        return format_html('{}<div><a href="{}">all events</a></div>', rows, url)

    # add = a note; change = memory_edit

    def get_fieldsets(self, request, obj=None):
        return self.add_fieldsets if obj is None else super().get_fieldsets(request, obj)

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else super().get_readonly_fields(request, obj)

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = self.add_form
        return super().get_form(request, obj, **kwargs)

    def add_view(self, request, form_url="", extra_context=None):
        return super().add_view(request, form_url, {"title": "Add a note", **(extra_context or {})})

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        # A rule a form cannot see (a block made meanwhile): the transaction is rolled back; say why.
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except ApplicationError as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def save_model(self, request, obj, form, change):
        if change:
            changes = {name: form.cleaned_data[name] for name in form.changed_data if name in EDITABLE_FIELDS}
            result = memory_edit(memory=obj, actor=admin_actor(request), **changes)
            for other in result.merged_ids:
                self.message_user(
                    request,
                    f"Memory #{other} was a duplicate of the edited text and was merged into this one.",
                    messages.INFO,
                )
            return
        data = form.cleaned_data
        result = memory_note_add(
            content=data["content"],
            language=data["language"],
            scope=data["scope"],
            owner=data.get("owner"),
            room=data.get("room"),
            about=data.get("about"),
            importance=data["importance"],
            embedding=form.embedding,
            actor=admin_actor(request),
        )
        obj.pk = result.memory.pk
        obj._state.adding = False
        if result.outcome == StoreOutcome.MERGED:
            self.message_user(
                request, f"The note duplicated memory #{obj.pk} and was merged into it.", messages.WARNING
            )

    # recall preview

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "recall-preview/",
                self.admin_site.admin_view(self.recall_preview_view),
                name="{}_{}_recall_preview".format(*info),
            ),
            *super().get_urls(),
        ]

    def recall_preview_view(self, request):
        """What the assistant would get for a question: memory_recall, the API's code path, rolled back."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = RecallPreviewForm(request.GET if "query" in request.GET else None)
        result = rows = None
        if form.is_valid():
            try:
                from memories.selectors.recall import memory_recall  # built on a parallel branch
            except ImportError:
                self.message_user(request, RECALL_UNAVAILABLE, messages.ERROR)
            else:
                data = form.cleaned_data
                try:
                    # The preview changes nothing: access counts and the audit trail are rolled back.
                    with transaction.atomic():
                        result = memory_recall(
                            query=data["query"],
                            speaker=data["speaker"],
                            room=data["room"],
                            conversation=data["conversation"],
                            limit=data["limit"],
                        )
                        rows = [recalled_row(item) for item in result.memories]
                        transaction.set_rollback(True)
                except ApplicationError as exc:
                    result = None
                    form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Recall preview",
            "form": form,
            "result": result,
            "rows": rows,
        }
        return TemplateResponse(request, "admin/memories/memory/recall_preview.html", context)


# --- tombstones --------------------------------------------------------------------------------


@admin.register(Tombstone)
class TombstoneAdmin(admin.ModelAdmin):
    """Forget blocks, without text: who, which scope, when. Lifting one lets its content be stored again."""

    list_display = [
        "id",
        "scope",
        "owner",
        "room",
        "forgotten_at",
        "forgotten_by_person",
        "forgotten_by_user",
        "memory_id",
        "embedder",
    ]
    list_filter = ["scope", "embedder"]
    list_select_related = ["owner", "room", "forgotten_by_person", "forgotten_by_user"]
    date_hierarchy = "forgotten_at"
    exclude = ["embedding"]
    actions = ["lift_blocks"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding")

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # replaced by lift_blocks, which says what deleting a block means
        return actions

    def has_add_permission(self, request):
        return False  # blocks come from forgetting, never by hand

    def has_change_permission(self, request, obj=None):
        return False

    def delete_model(self, request, obj):
        tombstone_lift(tombstone_ids=[obj.pk], actor=admin_actor(request))

    def delete_queryset(self, request, queryset):
        tombstone_lift(tombstone_ids=list(queryset.values_list("pk", flat=True)), actor=admin_actor(request))

    @admin.action(permissions=["delete"], description="Lift the selected forget blocks")
    def lift_blocks(self, request, queryset):
        if request.POST.get("post"):
            lifted = tombstone_lift(
                tombstone_ids=list(queryset.values_list("pk", flat=True)), actor=admin_actor(request)
            )
            self.message_user(request, f"Lifted {lifted} forget block(s).", messages.SUCCESS)
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Lift forget blocks",
            "subtitle": None,
            "objects_name": str(self.opts.verbose_name_plural),
            "queryset": queryset,
            "opts": self.opts,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "media": self.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/memories/tombstone/lift_confirmation.html", context)


# --- consolidation ------------------------------------------------------------------------------


@admin.register(ConsolidationRun)
class ConsolidationRunAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "status",
        "dry_run",
        "started_by",
        "started_at",
        "finished_at",
        "duration_ms",
        "merged",
        "superseded",
        "deleted",
        "error",
    ]
    list_filter = ["status", "dry_run", "started_by"]
    date_hierarchy = "started_at"

    # Runs are records: only the service writes them.
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_run_permission(self, request) -> bool:
        """Starting a run creates one: it takes the 'add' permission of consolidation runs."""
        return request.user.has_perm(f"{self.opts.app_label}.{get_permission_codename('add', self.opts)}")

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path("run/", self.admin_site.admin_view(self.run_view), name="{}_{}_run".format(*info)),
            *super().get_urls(),
        ]

    def changelist_view(self, request, extra_context=None):
        extra_context = {"has_run_permission": self.has_run_permission(request), **(extra_context or {})}
        return super().changelist_view(request, extra_context)

    def run_view(self, request):
        """POST: run consolidation now (or a dry run) and report its stats; an ERROR when one is already running."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_run_permission(request):
            raise PermissionDenied
        try:
            from memories.services.consolidate import memories_consolidate  # built on a parallel branch
        except ImportError:
            self.message_user(request, CONSOLIDATION_UNAVAILABLE, messages.ERROR)
            return redirect("admin:memories_consolidationrun_changelist")
        dry_run = request.POST.get("dry_run") == "1"
        try:
            run = memories_consolidate(started_by=admin_actor(request), dry_run=dry_run)
        except ApplicationError as exc:
            self.message_user(request, exc.message, messages.ERROR)
        else:
            self.message_user(request, *consolidation_message(run))
        return redirect("admin:memories_consolidationrun_changelist")


def consolidation_message(run: ConsolidationRun) -> tuple[str, int]:
    """The message and its level that report a finished run."""
    what = "Dry run" if run.dry_run else "Consolidation run"
    if run.status == "failed":
        return f"{what} #{run.pk} failed ({run.error or 'no reason recorded'}).", messages.ERROR
    verb = "would merge" if run.dry_run else "merged"
    return (
        f"{what} #{run.pk}: {verb} {run.merged}, superseded {run.superseded}, deleted {run.deleted} "
        f"in {run.duration_ms if run.duration_ms is not None else '?'} ms.",
        messages.SUCCESS,
    )


# --- settings -----------------------------------------------------------------------------------


@admin.register(MemorySettings)
class MemorySettingsAdmin(admin.ModelAdmin):
    """The one settings row on one page: the list redirects to it; it can be neither added nor deleted."""

    fieldsets = [
        ("Privacy", {"fields": ["personal_memories_to_cloud"]}),
        (
            "Retention (days)",
            {"fields": ["transcript_retention_days", "sighting_retention_days", "event_retention_days"]},
        ),
    ]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        row = MemorySettings.load()
        return redirect("admin:memories_memorysettings_change", row.pk)

    def response_change(self, request, obj):
        # The list is this page: stay here after saving.
        self.message_user(request, "Settings saved.", messages.SUCCESS)
        return redirect("admin:memories_memorysettings_change", obj.pk)


# --- text-free records --------------------------------------------------------------------------


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    """What happened to memory N, never what it said."""

    list_display = ["created_at", "memory", "action", "related", "count", "actor"]
    list_filter = ["action", "created_at"]
    search_fields = ["=memory_id", "=related_memory_id", "actor"]
    search_help_text = "A memory id, or an actor such as admin:1, tool, job:memory.consolidate."

    @admin.display(description="memory", ordering="memory_id")
    def memory(self, obj):
        return f"#{obj.memory_id}"

    @admin.display(description="related memory")
    def related(self, obj):
        return f"#{obj.related_memory_id}" if obj.related_memory_id else ""


@admin.register(EmbeddingSpace)
class EmbeddingSpaceAdmin(ReadOnlyAdmin):
    """Which embedder the vectors belong to; changed only by `manage.py reembed_memories`."""

    list_display = ["embedder", "dim", "updated_at"]
