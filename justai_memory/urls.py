from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("internal/v1/", include(("justai_memory.api.urls", "internal"))),
]
