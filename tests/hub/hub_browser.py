"""One person's browser on a JupyterHub, over plain HTTP: a cookie jar, the hub's login form
with its _xsrf field, and the X-XSRFToken header that JupyterLab adds to every request that
changes something. Every request and every wait is bounded in time."""
from __future__ import annotations

import json
import re
import time

import requests
from urllib.parse import parse_qsl, urlencode, urlsplit

REQUEST_TIMEOUT_S = 60


class HubBrowser:
    def __init__(self, hub_url: str):
        self.hub_url = hub_url.rstrip("/")
        self.session = requests.Session()

    def open(self, path: str, **params) -> requests.Response:
        """GET ``path`` (from the hub's address), following redirects as a browser does."""
        return self.session.get(self.hub_url + path, params=params, timeout=REQUEST_TIMEOUT_S)

    def send(self, method: str, path: str, body: dict) -> requests.Response:
        """``body`` as JSON, with the _xsrf cookie of ``path``'s server echoed in the header."""
        return self.session.request(method, self.hub_url + path, data=json.dumps(body),
                                    headers={"X-XSRFToken": self.xsrf_cookie(path),
                                             "Content-Type": "application/json"},
                                    timeout=REQUEST_TIMEOUT_S)

    def xsrf_cookie(self, path: str) -> str:
        """The _xsrf cookie this browser would send with ``path`` (the hub's and each server's differ)."""
        scoped = [cookie for cookie in self.session.cookies
                  if cookie.name == "_xsrf" and path.startswith(cookie.path.rstrip("/") + "/")]
        assert scoped, f"no _xsrf cookie for {path}: {[(c.name, c.path) for c in self.session.cookies]}"
        return max(scoped, key=lambda cookie: len(cookie.path)).value

    def log_in(self, name: str, password: str, then: str = "") -> requests.Response:
        """Fill in and post the hub's login form; the last response of its redirects, which
        lead to ``then`` (a hub path) or by default to starting the user's server."""
        form = self.open("/hub/login", next=then or None)
        form.raise_for_status()
        xsrf = re.search(r'name="_xsrf"\s+value="([^"]+)"', form.text)
        assert xsrf, form.text[:2000]
        return self.session.post(self.hub_url + "/hub/login", params={"next": then or None},
                                 data={"username": name, "password": password, "_xsrf": xsrf.group(1)},
                                 timeout=REQUEST_TIMEOUT_S)

    def wait_for_own_server(self, name: str, within_s: float) -> requests.Response:
        """Reload /user/NAME/ (the hub shows its spawn-pending page meanwhile) until the
        server answers with its own page; that page's response."""
        deadline = time.monotonic() + within_s
        while True:
            page = self.open(f"/user/{name}/")
            if page.ok and "/hub/" not in page.url:
                return page
            assert time.monotonic() < deadline, f"{name}'s server did not start in {within_s} s: {page.url}"
            time.sleep(1)


def address_without_hub_retries(url: str) -> str:
    """``url`` less the ``redirects=N`` the hub appends when a request for a server reached
    the hub before the proxy had that server's route (a race, so it comes and goes)."""
    parts = urlsplit(url)
    query = [(key, value) for key, value in parse_qsl(parts.query) if key != "redirects"]
    return parts._replace(query=urlencode(query)).geturl()


def page_config(lab_page: str) -> dict:
    """The JSON that JupyterLab's page carries for its front end (jupyter-config-data)."""
    found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', lab_page, re.S)
    assert found, lab_page[:2000]
    return json.loads(found.group(1))
