"""Every admin page of the walk (justai_memory/tests/test_admin_walk.py) in Chromium at 1,366 px in German: no
table is wider than the box it is shown in (a column cut off, such as the clean-up runs' ERROR, is a finding).

The pattern and fixtures of memories/tests/test_browser.py; screenshots of the pages that overflow go to
test-artifacts/browser/<test>/.
"""

import pytest

from justai_memory.tests.test_admin_walk import admin_urls, everything  # noqa: F401 (the fixture)
from memories.tests.test_browser import LAPTOP, PASSWORD, artefacts, chromium, log_in  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Each table's overflow: how far it reaches past its parent's inner width, or past the window's right edge.
TABLES_WIDER_THAN_THEIR_BOX = """() => [...document.querySelectorAll('table')]
  .filter(t => t.offsetParent !== null)
  .map(t => {
    const box = t.parentElement;
    const past = Math.max(t.offsetWidth - box.clientWidth, t.getBoundingClientRect().right - window.innerWidth);
    return [t.id || t.className || box.id || box.className || 'table', Math.round(past)];
  })
  .filter(([name, past]) => past > 1)"""


def test_no_admin_table_is_wider_than_its_box_at_1366_px(
    live_server,
    chromium,  # noqa: F811
    admin_user,
    everything,  # noqa: F811
    artefacts,  # noqa: F811
):
    admin_user.set_password(PASSWORD)
    admin_user.save()
    context = chromium.new_context(viewport=LAPTOP, locale="de-DE")
    page = context.new_page()
    page.set_default_timeout(20_000)
    log_in(page, live_server)
    findings, walked = [], 0
    for name, url, data in admin_urls(admin_user, everything):
        if data is not None:
            continue  # an action's page: it may act; the list it comes from is walked
        page.goto(f"{live_server.url}{url}")
        walked += 1
        wide = page.evaluate(TABLES_WIDER_THAN_THEIR_BOX)
        if wide:
            findings.append(f"{name} ({url}): {wide}")
            page.screenshot(path=artefacts / f"{len(findings)}-{name.replace(' ', '-')}.png", full_page=True)
    assert walked > 50
    assert not findings, "\n".join(findings)
