"""Admin users, groups and clients in the household's language, and deletion pages whose rows of other apps are named in it.

Django stores a permission's name in English when it creates it ("Can add access token") and
django-oauth-toolkit's models have English verbose names that no catalogue marks: the permission lists
and the "these will be deleted too" lists are worded here from the codename's action and the model's
name, each through the project's catalogue, without touching the other apps' models (their migrations).
"""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, Permission
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import capfirst
from django.utils.translation import gettext

from connections.admin import ClientAdmin
from connections.models import Client

# The four permissions Django makes for each model, by the start of their codename.
ACTIONS = {
    "add": "Can add %(model)s",
    "change": "Can change %(model)s",
    "delete": "Can delete %(model)s",
    "view": "Can view %(model)s",
}


def model_words(name: str) -> str:
    """A model's verbose name through the catalogues (for the apps that left it unmarked)."""
    return gettext(str(name))


def permission_words(permission: Permission) -> str:
    """'Verbindungen (OAuth) | Zugangs-Token | Darf Zugangs-Token hinzufügen', every part in the page's language."""
    content_type = permission.content_type
    model = content_type.model_class()
    app = model._meta.app_config.verbose_name if model else content_type.app_label
    model_name = model_words(model._meta.verbose_name) if model else content_type.model
    action = permission.codename.partition("_")[0]
    name = gettext(ACTIONS[action]) % {"model": model_name} if action in ACTIONS else permission.name
    return f"{gettext(str(app))} | {capfirst(model_name)} | {name}"


def deletions_in_words(to_delete: list, model_count: dict) -> tuple[list, dict]:
    """Django's deletion lists with each row's model name through the catalogues ('Access token: …')."""

    def row(item):
        if isinstance(item, list):
            return [row(i) for i in item]
        name, sep, rest = str(item).partition(": ")
        if not sep:
            return item
        words = capfirst(model_words(name[:1].lower() + name[1:]))
        return format_html("{}: {}", words, SafeString(rest)) if isinstance(item, SafeString) else f"{words}: {rest}"

    return row(to_delete), {capfirst(model_words(str(name))): n for name, n in model_count.items()}


class DeletionInWords:
    """A model admin mixin: the delete confirmations name the rows deleted with it in the page's language."""

    def get_deleted_objects(self, objs, request):
        to_delete, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        to_delete, model_count = deletions_in_words(to_delete, model_count)
        return to_delete, model_count, perms_needed, protected


class PermissionsInWords:
    """A model admin mixin: the permission lists in the page's language."""

    def formfield_for_manytomany(self, db_field, request=None, **kwargs):
        field = super().formfield_for_manytomany(db_field, request=request, **kwargs)
        if field is not None and db_field.name in ("permissions", "user_permissions"):
            field.queryset = field.queryset.select_related("content_type")
            field.label_from_instance = permission_words
        return field


class HouseholdUserAdmin(DeletionInWords, PermissionsInWords, UserAdmin):
    pass


class HouseholdGroupAdmin(DeletionInWords, PermissionsInWords, GroupAdmin):
    pass


class HouseholdClientAdmin(DeletionInWords, ClientAdmin):
    """A client's deletion takes its tokens with it: named in the page's language."""


for model, model_admin in (
    (get_user_model(), HouseholdUserAdmin),
    (Group, HouseholdGroupAdmin),
    (Client, HouseholdClientAdmin),
):
    admin.site.unregister(model)
    admin.site.register(model, model_admin)
