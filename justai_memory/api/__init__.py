"""The internal JSON API, /internal/v1/, on django-ninja: one router module per area, schemas next to their endpoints."""
