from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index"), name="root"),
    path("admin/", admin.site.urls),
    path("internal/v1/", include(("justai_memory.api.urls", "internal"))),
]

# Errors Django answers outside any view (a foreign Host, a middleware's error): JSON on API paths.
handler400 = "justai_memory.edge.bad_request"
handler500 = "justai_memory.edge.server_error"
