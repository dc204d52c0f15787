"""List filters of the memory list."""

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from memories.admin.base import language_words
from memories.models import PROVENANCE_LABELS, Provenance

# The labels the assistant is told (PROVENANCE_LABELS: prompt text, never translated), in the admin's language.
LABEL_NAMES = {
    Provenance.CONFIRMED: _("confirmed"),
    Provenance.OBSERVED: _("observed"),
    Provenance.EXTRACTED: _("from conversation"),
    Provenance.INFERRED: _("GUESS"),
}
assert LABEL_NAMES.keys() == PROVENANCE_LABELS.keys()


def label_name(provenance: str) -> str:
    """A memory's label as the admin page shows it."""
    return str(LABEL_NAMES[provenance])


class ScoreBandFilter(admin.SimpleListFilter):
    """Low / medium / high bands of a 0..1 score."""

    bands = {"low": (0.0, 1 / 3), "medium": (1 / 3, 2 / 3), "high": (2 / 3, 1.01)}

    def lookups(self, request, model_admin):
        return [("low", _("low (< 0.33)")), ("medium", _("medium")), ("high", _("high (≥ 0.67)"))]

    def queryset(self, request, queryset):
        if self.value() not in self.bands:
            return queryset
        low, high = self.bands[self.value()]
        return queryset.filter(**{f"{self.parameter_name}__gte": low, f"{self.parameter_name}__lt": high})


class ConfidenceFilter(ScoreBandFilter):
    title = _("confidence")
    parameter_name = "confidence"


class ImportanceFilter(ScoreBandFilter):
    title = _("importance")
    parameter_name = "importance"


class AccessCountFilter(admin.SimpleListFilter):
    title = _("access count")
    parameter_name = "recalled"

    def lookups(self, request, model_admin):
        return [("never", _("never recalled")), ("yes", _("recalled"))]

    def queryset(self, request, queryset):
        if self.value() == "never":
            return queryset.exclude(access__count__gt=0)
        if self.value() == "yes":
            return queryset.filter(access__count__gt=0)
        return queryset


class LabelFilter(admin.SimpleListFilter):
    """Provenance under the names the assistant is told (confirmed / observed / from conversation / GUESS)."""

    title = _("label")
    parameter_name = "provenance"

    def lookups(self, request, model_admin):
        return [(value, LABEL_NAMES[value]) for value in Provenance.values]

    def queryset(self, request, queryset):
        if self.value() in Provenance.values:
            return queryset.filter(provenance=self.value())
        return queryset


class LanguageFilter(admin.SimpleListFilter):
    """The languages the memories are in, by name."""

    title = _("language")
    parameter_name = "language"

    def lookups(self, request, model_admin):
        codes = model_admin.get_queryset(request).order_by().values_list("language", flat=True).distinct()
        return sorted(((code, language_words(code)) for code in codes), key=lambda item: str(item[1]))

    def queryset(self, request, queryset):
        return queryset.filter(language=self.value()) if self.value() else queryset
