"""README's nginx configuration is ``deploy/nginx/torchatlas.conf``, the file the balancer
e2e test (tests/e2e/test_balancer.py) runs; it keeps what class mode needs behind a proxy."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.balancer import EXAMPLE_REPLICAS, SITE, Nginx, nginx_missing, site_config

ROOT = Path(__file__).resolve().parents[2]


def readme_nginx_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"^```nginx\n(.*?)^```$", text, flags=re.S | re.M)


def directives(text: str) -> list[str]:
    """The configuration's directives, one per entry, comments and spacing dropped."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [" ".join(line.split()) for line in lines if line]


def test_readme_shows_the_tested_file() -> None:
    assert readme_nginx_blocks() == [SITE.read_text(encoding="utf-8")]


def test_the_file_keeps_what_class_mode_needs() -> None:
    found = directives(SITE.read_text(encoding="utf-8"))
    for needed in (
        # affinity by a per-browser key, never by address (ip_hash: a /24, a NAT: one key)
        "hash $atlas_key consistent;",
        "add_header Set-Cookie $atlas_set_key always;",
        # websockets, kept open through a lesson
        "proxy_http_version 1.1;",
        "proxy_set_header Upgrade $http_upgrade;",
        "proxy_set_header Connection $connection_upgrade;",
        "proxy_read_timeout 1h;",
        # the replicas believe only what nginx itself saw (ATLAS_TRUSTED_PROXIES)
        "proxy_set_header X-Forwarded-For $remote_addr;",
        # Streamlit checks a websocket's Origin against Host, port included
        "proxy_set_header Host $http_host;",
        # a dead replica's browsers are sent to another
        "proxy_next_upstream error timeout;",
    ):
        assert needed in found, needed
    assert not any(d.startswith("ip_hash") for d in found)
    assert "proxy_set_header Host $host;" not in found  # drops the port: websockets refused


def test_the_test_addresses_replace_the_examples_once() -> None:
    text = site_config(8080, ["127.0.0.1:1", "127.0.0.1:2"])
    assert "listen 127.0.0.1:8080;" in directives(text)
    assert "10.0.0." not in text
    servers = [d for d in directives(text) if d.startswith("server 127.0.0.1:")]
    assert [s.split()[1] for s in servers] == ["127.0.0.1:1", "127.0.0.1:2"]
    with pytest.raises(ValueError):
        site_config(8080, ["127.0.0.1:1"] * (len(EXAMPLE_REPLICAS) + 1))


def test_nginx_accepts_the_configuration(tmp_path: Path) -> None:
    reason = nginx_missing()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    Nginx(tmp_path, 8080, ["127.0.0.1:1", "127.0.0.1:2"]).check()  # nginx -t
