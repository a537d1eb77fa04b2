"""How often the secure port asks the API server, and what a scraper sees when the API
server cannot answer: upstream's caches (both token outcomes for the token TTL, decisions
for the authorized / unauthorized TTLs), one review for concurrent misses, upstream's
webhook backoff, and failures that are never cached nor explained to the client."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pyccm.kubeapi.errors import ServerError
from pyccm.kubeapi.reviews import ReviewSettings, with_backoff
from pyccm.manager.access import AccessSettings
from pyccm.manager.serving import ServingSettings
from pyccm_sim.kube.testing import KubeSimHandle
from tests.support.fake_time import FakeTime
from tests.support.https import (
    PAIR,
    READER_USER,
    STRANGER_USER,
    FakeClock,
    Reply,
    fetch,
    mark,
    reviews,
    serving,
    trusting,
)

FAST_RETRIES = ReviewSettings(first_backoff=0.01)


def scrape(port: int, certs: Path, token: str) -> Reply:
    return fetch(port, "/metrics", context=trusting(certs / f"{PAIR}.crt"), token=token)


def counts(kube: KubeSimHandle, since: int) -> tuple[int, int]:
    made = [r["resource"] for r in reviews(kube, since)]
    return made.count("tokenreviews"), made.count("subjectaccessreviews")


def test_answers_are_reviewed_again_once_their_ttl_has_passed(
    kube: KubeSimHandle, ccm_kubeconfig: Path, tmp_path: Path
) -> None:
    kube.add_token("reader-ttl", READER_USER)
    clock = FakeClock()
    with serving(
        ccm_kubeconfig, serving=ServingSettings(port=0, cert_dir=str(tmp_path)), clock=clock
    ) as server:
        since = mark(kube)
        for _ in range(3):
            assert scrape(server.port, tmp_path, "reader-ttl").status == 200
        assert counts(kube, since) == (1, 1)
        clock.advance(9.5)
        assert scrape(server.port, tmp_path, "reader-ttl").status == 200
        assert counts(kube, since) == (1, 1)
        clock.advance(1.0)  # 10.5 s: past upstream's 10 s for both
        assert scrape(server.port, tmp_path, "reader-ttl").status == 200
        assert counts(kube, since) == (2, 2)


def test_a_denial_and_an_unknown_token_are_cached_for_their_own_ttls(
    kube: KubeSimHandle, ccm_kubeconfig: Path, tmp_path: Path
) -> None:
    kube.add_token("reader-ttls", READER_USER)
    kube.add_token("stranger-ttls", STRANGER_USER)
    clock = FakeClock()
    access = AccessSettings(token_ttl=100.0, authorized_ttl=10.0, unauthorized_ttl=1.0)
    settings = ServingSettings(port=0, cert_dir=str(tmp_path))
    with serving(ccm_kubeconfig, serving=settings, access=access, clock=clock) as server:
        since = mark(kube)
        assert scrape(server.port, tmp_path, "reader-ttls").status == 200
        assert scrape(server.port, tmp_path, "stranger-ttls").status == 403
        assert scrape(server.port, tmp_path, "unknown-ttls").status == 401
        assert counts(kube, since) == (3, 2)
        clock.advance(2.0)  # past the unauthorized TTL only
        assert scrape(server.port, tmp_path, "reader-ttls").status == 200
        assert scrape(server.port, tmp_path, "stranger-ttls").status == 403
        assert scrape(server.port, tmp_path, "unknown-ttls").status == 401
        # The denial was asked again; the token answers (both kinds) were not.
        assert counts(kube, since) == (3, 3)


def test_concurrent_scrapes_with_a_new_token_make_one_review(
    kube: KubeSimHandle, ccm_kubeconfig: Path, tmp_path: Path
) -> None:
    kube.add_token("reader-burst", READER_USER)
    settings = ServingSettings(port=0, cert_dir=str(tmp_path))
    with serving(ccm_kubeconfig, serving=settings) as server:
        since = mark(kube)
        # Each review takes a second, so all eight scrapes miss the cache together.
        kube.set_faults(latency=1.0)
        answers: list[int] = []
        try:
            threads = [
                threading.Thread(
                    target=lambda: answers.append(
                        scrape(server.port, tmp_path, "reader-burst").status
                    )
                )
                for _ in range(8)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
        finally:
            kube.set_faults(latency=0.0)
    assert answers == [200] * 8
    assert counts(kube, since) == (1, 1)


def test_a_failing_token_review_is_retried_then_unauthorized_and_not_cached(
    kube: KubeSimHandle, ccm_kubeconfig: Path, tmp_path: Path
) -> None:
    kube.add_token("reader-outage", READER_USER)
    settings = ServingSettings(port=0, cert_dir=str(tmp_path))
    with serving(ccm_kubeconfig, serving=settings, review=FAST_RETRIES) as server:
        since = mark(kube)
        kube.set_faults(error_rates={"create": 1.0})
        try:
            during = scrape(server.port, tmp_path, "reader-outage")
        finally:
            kube.set_faults(error_rates={})
        failed = reviews(kube, since)
        after = scrape(server.port, tmp_path, "reader-outage")
    assert (during.status, during.json()["message"]) == (401, "Unauthorized")
    # Upstream's webhook backoff: five attempts, each a 500 from the API server.
    assert [(r["resource"], r["code"]) for r in failed] == [("tokenreviews", 500)] * 5
    assert after.status == 200


def test_a_failing_access_review_is_a_bare_500(
    kube: KubeSimHandle, ccm_kubeconfig: Path, tmp_path: Path
) -> None:
    kube.add_token("reader-sar-outage", READER_USER)
    clock = FakeClock()
    access = AccessSettings(token_ttl=100.0, authorized_ttl=1.0)
    settings = ServingSettings(port=0, cert_dir=str(tmp_path))
    with serving(
        ccm_kubeconfig, serving=settings, access=access, clock=clock, review=FAST_RETRIES
    ) as server:
        assert scrape(server.port, tmp_path, "reader-sar-outage").status == 200
        clock.advance(2.0)  # the decision has expired, the token has not
        kube.set_faults(error_rates={"create": 1.0})
        try:
            reply = scrape(server.port, tmp_path, "reader-sar-outage")
        finally:
            kube.set_faults(error_rates={})
    assert reply.status == 500
    assert reply.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "InternalError",
        "reason": "InternalError",
        "code": 500,
    }


def test_the_backoff_is_upstreams_webhook_backoff() -> None:
    time = FakeTime(start=0.0)
    attempts: list[float] = []

    def failing(timeout: float) -> bytes:
        attempts.append(timeout)
        raise ServerError("503 ServiceUnavailable", code=503)

    with pytest.raises(ServerError):
        with_backoff(
            failing, settings=ReviewSettings(), what="x", clock=time.clock, sleep=time.sleep
        )
    assert len(attempts) == 5
    for pause, base in zip(time.slept, (0.5, 0.75, 1.125, 1.6875), strict=True):
        assert base <= pause <= base * 1.2
    # Each attempt gets what is left of the 10 s review timeout.
    assert attempts[0] == 10.0
    assert attempts[-1] == pytest.approx(10.0 - sum(time.slept))
