"""The memory list and pages: hybrid search, edit (``memory_edit``), add a note, forget on delete."""

import re

from django.contrib import admin, messages
from django.contrib.admin.options import IS_POPUP_VAR
from django.contrib.admin.views.main import ORDER_VAR, SEARCH_VAR
from django.db.models import Case, F, IntegerField, Value, When
from django.db.models.functions import Coalesce
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format, number_format
from django.utils.html import conditional_escape, format_html, format_html_join
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeData, mark_safe
from django.utils.text import Truncator
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from justai_core.errors import ApplicationError
from memories.actors import Actor
from memories.admin.base import Named, actor_name, language_words, memory_link, memory_title, when
from memories.admin.filters import (
    AccessCountFilter,
    ConfidenceFilter,
    ImportanceFilter,
    LabelFilter,
    LanguageFilter,
    label_name,
)
from memories.admin.forms import MemoryChangeForm, MemoryNoteForm
from memories.models import AuditEvent, Memory, Scope, Status
from memories.selectors.search import memories_search, memories_search_hits
from memories.services.edit import EDITABLE_FIELDS, MemoryChanges, memory_edit, memory_note_add
from memories.services.forget import memories_forget
from memories.services.store import StoreOutcome


def match_reason(hit) -> str:
    """Why a memory is in a search's result, in words: its words, its meaning (with the similarity), or both."""
    if hit is None:
        return gettext("not a match of the search (selected with every memory of the list)")
    reasons = []
    if hit.words is not None:
        reasons.append(gettext("holds words of the search"))
    if hit.similarity is not None:
        reasons.append(
            gettext("close in meaning (similarity %(similarity)s)") % {"similarity": number_format(hit.similarity, 2)}
        )
    return ", ".join(reasons)


def forget_selected(delete_selected):
    """Django's ``delete_selected`` (which asks first, then calls ``delete_queryset``: forgetting), whose
    confirmation, when the list was searched, says for each memory why the search found it."""

    def action(modeladmin, request, queryset):
        if request.POST.get("post") and modeladmin.has_delete_permission(request):
            # Confirmed: forget them (delete_queryset), and say so in the words of forgetting. Memories
            # protect nothing and cascade only to their own counters, so Django's checks have nothing to add.
            n = len(queryset)
            if n:
                modeladmin.log_deletions(request, queryset)
                modeladmin.delete_queryset(request, queryset)
                message = ngettext(
                    "Forgot %(n)d memory: a forget block without text keeps it from being stored again.",
                    "Forgot %(n)d memories: forget blocks without text keep them from being stored again.",
                    n,
                )
                modeladmin.message_user(request, message % {"n": n}, messages.SUCCESS)
            return None
        response = delete_selected(modeladmin, request, queryset)
        search = request.GET.get(SEARCH_VAR, "").strip()
        if response is None or not search or not hasattr(response, "context_data"):
            return response
        limit = max(queryset.count(), 1)
        hits = {hit.id: hit for hit in memories_search_hits(query=search, queryset=queryset, limit=limit)}
        response.context_data["search"] = search
        response.context_data["matches"] = [(obj, match_reason(hits.get(obj.pk))) for obj in queryset]
        return response

    action.allowed_permissions = getattr(delete_selected, "allowed_permissions", ("delete",))
    action.short_description = getattr(delete_selected, "short_description", "")
    return action


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "content_preview",
        "kind_and_label",
        "scope_with_owner",
        "language_name",
        "status_with_successor",
        "scores",
        "recalled",
    ]
    list_display_links = ["id", "content_preview"]
    list_filter = [
        "kind",
        LabelFilter,
        "scope",
        ("owner", admin.RelatedOnlyFieldListFilter),
        ("room", admin.RelatedOnlyFieldListFilter),
        LanguageFilter,
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
    search_help_text = _("Searches by meaning and by words: 'Schlüssel' finds 'key', '4711' finds the gate code.")
    exclude = ["embedding"]
    form = MemoryChangeForm
    add_form = MemoryNoteForm
    readonly_fields = [
        "source",
        "learned_from",
        "occurrences",
        "access_count",
        "last_accessed",
        "status",
        "superseded_by_link",
        "supersedes_links",
        "created_at",
        "updated_at",
        "audit_trail",
    ]
    fieldsets = [
        (None, {"fields": ["content", "language", "kind"]}),
        (
            _("Where it came from"),
            {"fields": ["learned_from", "provenance", "confidence", "importance", "source", "occurrences"]},
        ),
        (_("Who sees it"), {"fields": ["scope", "owner", "room", "about"]}),
        (_("Contradictions"), {"fields": ["subject", "predicate", "status", "superseded_by_link", "supersedes_links"]}),
        (_("Dates and use"), {"fields": ["valid_at", "created_at", "updated_at", "access_count", "last_accessed"]}),
        (_("History"), {"fields": ["audit_trail"]}),
    ]
    add_fieldsets = [
        (
            None,
            {
                "fields": ["content", "language", "scope", "owner", "room", "about", "importance"],
                "description": _(
                    "A note is stored as kind 'note', source 'admin', provenance 'confirmed'. "
                    "When it duplicates a memory of the same scope, the two are merged."
                ),
            },
        )
    ]

    def get_queryset(self, request):
        # Vectors and the full-text column are large and never shown.
        return super().get_queryset(request).defer("embedding", "search_vector")

    # Deleting in the admin is forgetting: a text-less tombstone stays and blocks the content's return.
    # The pages say so: "Forget" (templates/admin/memories/memory/), never "Delete".
    def get_actions(self, request):
        actions = super().get_actions(request)
        if "delete_selected" in actions:
            func, name, _description = actions["delete_selected"]
            actions["delete_selected"] = (forget_selected(func), name, _("Forget the selected memories"))
        return actions

    def response_delete(self, request, obj_display, obj_id):
        """Says "forgotten" (by its first words), back to the page the forget started from (a person's page)
        when it is on this site, else to the list."""
        if IS_POPUP_VAR in request.POST:
            return super().response_delete(request, obj_display, obj_id)
        title = getattr(request, "forgotten_title", obj_display)
        message = gettext("Forgotten: %(memory)s. A forget block without text keeps it from being stored again.")
        self.message_user(request, message % {"memory": title}, messages.SUCCESS)
        back = request.POST.get("next", "")
        if back and url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
            return HttpResponseRedirect(back)
        return HttpResponseRedirect(reverse("admin:memories_memory_changelist"))

    def delete_model(self, request, obj):
        request.forgotten_title = memory_title(obj)
        memories_forget(memory_ids=[obj.pk], actor=Actor.admin(request.user), by_user=request.user)

    def delete_queryset(self, request, queryset):
        memories_forget(
            memory_ids=list(queryset.values_list("pk", flat=True)),
            actor=Actor.admin(request.user),
            by_user=request.user,
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

    # list columns (few and narrow, so that the list fits a 1,366 px screen)

    @admin.display(description=_("content"), ordering="content")
    def content_preview(self, obj):
        return Truncator(obj.content).chars(100)

    @admin.display(description=_("kind · label"), ordering="provenance")
    def kind_and_label(self, obj):
        return format_html("{}<br><small>{}</small>", obj.get_kind_display(), label_name(obj.provenance))

    @admin.display(description=_("confidence · importance"), ordering="-importance")
    def scores(self, obj):
        return f"{number_format(obj.confidence, 2)} · {number_format(obj.importance, 2)}"

    # Never recalled (no MemoryAccess row) sorts as 0 / as the oldest access.
    @admin.display(description=_("recalled"), ordering=Coalesce("access__count", Value(0)))
    def recalled(self, obj):
        if not obj.access_count:
            return gettext("never")
        times = ngettext("%(n)d time", "%(n)d times", obj.access_count) % {"n": obj.access_count}
        return format_html("{}<br><small>{}</small>", times, when(obj.last_accessed_at))

    @admin.display(description=_("access count"), ordering=Coalesce("access__count", Value(0)))
    def access_count(self, obj):
        return obj.access_count

    @admin.display(description=_("last accessed"), ordering=F("access__last_accessed_at").asc(nulls_first=True))
    def last_accessed(self, obj):
        return when(obj.last_accessed_at)

    @admin.display(description=_("language"), ordering="language")
    def language_name(self, obj):
        return language_words(obj.language)

    @admin.display(description=_("scope"), ordering="scope")
    def scope_with_owner(self, obj):
        if obj.scope == Scope.PRIVATE:
            return format_html("{}<br><small>{}</small>", obj.get_scope_display(), obj.owner)
        if obj.scope == Scope.ROOM:
            return format_html("{}<br><small>{}</small>", obj.get_scope_display(), obj.room)
        return obj.get_scope_display()

    @admin.display(description=_("status"), ordering="status")
    def status_with_successor(self, obj):
        if obj.status == Status.SUPERSEDED and obj.superseded_by_id:
            return format_html("{} {}", gettext("superseded by"), memory_link(obj.superseded_by_id))
        return obj.get_status_display()

    @admin.display(description=_("learned from"))
    def learned_from(self, obj):
        """Where it was learned (the wiring layer's admin links the conversation or event)."""
        return obj.source_ref or "-"

    # read-only fields of the change page

    @admin.display(description=_("superseded by"))
    def superseded_by_link(self, obj):
        if not obj.superseded_by_id:
            return "-"
        successor = Memory.objects.only("pk", "content").get(pk=obj.superseded_by_id)
        return format_html("{}: {}", memory_link(successor.pk), Truncator(successor.content).chars(120))

    @admin.display(description=_("supersedes"))
    def supersedes_links(self, obj):
        older = Memory.objects.filter(superseded_by=obj).only("pk", "content").order_by("-valid_at")
        if not older:
            return "-"
        return format_html_join(
            "",
            "<div>{}: {}</div>",
            ((memory_link(m.pk), Truncator(m.content).chars(120)) for m in older),
        )

    @admin.display(description=_("history"))
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
                    date_format(timezone.localtime(e.created_at), "SHORT_DATETIME_FORMAT"),
                    e.get_action_display(),
                    actor_name(e.actor),
                    format_html(" ({} {})", gettext("with"), memory_link(e.related_memory_id))
                    if e.related_memory_id
                    else "",
                )
                for e in events
            ),
        )
        return format_html('{}<div><a href="{}">{}</a></div>', rows, url, gettext("all events"))

    # add = a note; change = memory_edit

    def get_fieldsets(self, request, obj=None):
        return self.add_fieldsets if obj is None else super().get_fieldsets(request, obj)

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else super().get_readonly_fields(request, obj)

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = self.add_form
        form = super().get_form(request, obj, **kwargs)
        refusal = getattr(request, "memory_refusal", None)
        if refusal is None:
            return form

        class RefusedForm(form):
            """The posted form again, with the reason the service refused it on the field it names."""

            def clean(self):
                cleaned = super().clean()
                self.add_error(refusal.field if refusal.field in self.fields else None, refusal.message)
                return cleaned

        return RefusedForm

    def message_user(self, request, message, level=messages.INFO, extra_tags="", fail_silently=False):
        """Django's own messages name a memory by ``str()`` ("Memory #12", what its log keeps); the page's
        messages name it by its first words."""
        named = getattr(request, "memory_named", None)
        # with the quotes Django's message puts around it: the title brings its own („Der Code …“)
        by_id = re.compile(rf"[“„«\"]?{re.escape(named[0])}(?!\d)[”“»\"]?") if named else None
        if by_id and by_id.search(str(message)):
            text = by_id.sub(conditional_escape(named[1]), str(message))
            message = mark_safe(text) if isinstance(message, SafeData) else text
        super().message_user(request, message, level, extra_tags, fail_silently)

    def history_view(self, request, object_id, extra_context=None):
        """Django's history page, titled and led to by the memory's first words (``str()`` is "Memory #N")."""
        response = super().history_view(request, object_id, extra_context)
        context = getattr(response, "context_data", None) or {}
        if isinstance(context.get("object"), Memory):
            title = memory_title(context["object"])
            context["title"] = gettext("Change history: %s") % title
            context["object"] = Named(context["object"], title)
        return response

    def change_view(self, request, object_id, form_url="", extra_context=None):
        memory = Memory.objects.filter(pk=object_id).only("pk", "content").first() if object_id.isdigit() else None
        named = {"subtitle": memory_title(memory)} if memory else {}
        return super().change_view(request, object_id, form_url, {**named, **(extra_context or {})})

    def add_view(self, request, form_url="", extra_context=None):
        return super().add_view(request, form_url, {"title": gettext("Add a note"), **(extra_context or {})})

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        # The services hold the rules (a forget block, a duplicate, the limits): when one refuses, its
        # transaction is rolled back and the posted form is shown again with the reason.
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except ApplicationError as exc:
            request.memory_refusal = exc
            return super().changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj, form, change):
        if change:
            changes = MemoryChanges(
                **{name: form.cleaned_data[name] for name in form.changed_data if name in EDITABLE_FIELDS}
            )
            result = memory_edit(memory=obj, actor=Actor.admin(request.user), changes=changes)
            request.memory_named = (str(obj), memory_title(obj))
            for other in result.merged_ids:
                self.message_user(
                    request,
                    gettext("Memory #%(id)s was a duplicate of the edited text and was merged into this one.")
                    % {"id": other},
                    messages.INFO,
                )
            return
        data = form.cleaned_data
        result = memory_note_add(
            content=data["content"],
            language=data.get("language") or None,
            scope=data["scope"],
            owner=data.get("owner"),
            room=data.get("room"),
            about=data.get("about"),
            importance=data["importance"],
            actor=Actor.admin(request.user),
        )
        obj.pk = result.memory.pk
        obj._state.adding = False
        request.memory_named = (str(obj), memory_title(result.memory))
        if result.outcome == StoreOutcome.MERGED:
            self.message_user(
                request,
                gettext("The note duplicated %(memory)s and was merged into it.")
                % {"memory": memory_title(result.memory)},
                messages.WARNING,
            )
