"""The household's admin: the site whose home is the status page, and the pages that span the apps.

- ``apps``: ``HouseholdAdminConfig``, installed in place of ``django.contrib.admin``; its ``ready``
  registers this package's model admins.
- ``site``: ``HouseholdAdminSite``, the status page as its home and ``/admin/status.json``;
  ``status``: that page's figures and charts.
- ``people``: people and rooms (deleting and exporting a person span the apps).
- ``recall_preview``: the memory admin again, with the recall preview; ``trail``: a memory's provenance.
- ``jobs``: the job cluster's lists, narrowed.

Importing the package registers nothing: INSTALLED_APPS imports ``apps`` before the models exist.
"""
