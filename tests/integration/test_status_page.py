"""The status page (minikafka.status_page): its JSON API against live brokers, and the page itself in a real
browser (headless chromium through selenium) on a live 3-broker cluster."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer

import minikafka

pytest.importorskip("hypercorn", reason="the status page needs the `ui` extra (hypercorn, starlette)")

DEADLINE_S = 60.0


def get(url: str, path: str) -> Any:
    with urllib.request.urlopen(url + path, timeout=30) as answer:
        return json.loads(answer.read())


def post(url: str, path: str) -> tuple[int, Any]:
    request = urllib.request.Request(url + path, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_json_endpoints_show_what_state_shows() -> None:
    with minikafka.Broker(ui=True) as broker:
        broker.state.create_topic("orders", partitions=2, replication_factor=1)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        for i in range(5):
            producer.send("orders", b"v%d" % i, partition=i % 2)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer("orders", bootstrap_servers=broker.bootstrap_servers, group_id="billing",
                                 auto_offset_reset="earliest", enable_auto_commit=False)
        seen = 0
        deadline = time.monotonic() + DEADLINE_S
        while seen < 5 and time.monotonic() < deadline:
            seen += sum(len(batch) for batch in consumer.poll(timeout_ms=500).values())
        assert seen == 5
        consumer.commit()
        fault = broker.faults.add_latency(1, api="Metadata", count=None)

        url = broker.ui_url
        assert url.startswith("http://127.0.0.1:")
        cluster = get(url, "api/cluster")
        assert cluster["brokers"][0]["node_id"] == broker.node_id
        assert cluster["brokers"][0]["running"] is True
        assert cluster["can_kill"] is False

        topics = {t["name"]: t for t in get(url, "api/topics")["topics"]}
        for expected in broker.state.partitions("orders"):
            shown = topics["orders"]["partitions"][expected.partition]
            assert (shown["leader"], shown["isr"], shown["replicas"]) == (expected.leader, expected.isr,
                                                                         expected.replicas)
            assert shown["high_watermark"] == expected.high_watermark
            assert shown["log_end_offset"] == expected.log_end_offset
            assert shown["last_stable_offset"] == expected.last_stable_offset
            assert shown["under_replicated"] is False
            assert shown["size_bytes"] == expected.size_bytes > 0  # the leader's log: 61 bytes a batch and more
        assert sum(p["high_watermark"] for p in topics["orders"]["partitions"]) == 5

        group = broker.state.group("billing")
        shown_group = next(g for g in get(url, "api/groups")["groups"] if g["group_id"] == "billing")
        assert shown_group["state"] == group.state
        assert [m["member_id"] for m in shown_group["members"]] == [m.member_id for m in group.members]
        assert sorted(map(tuple, shown_group["members"][0]["assignment"])) == [("orders", 0), ("orders", 1)]
        assert {(o["topic"], o["partition"]): (o["committed"], o["lag"]) for o in shown_group["offsets"]} == \
            {tp: (offset, 0) for tp, offset in group.offsets.items()}
        consumer.close()

        faults = get(url, "api/faults")["faults"]
        assert [f["id"] for f in faults] == [fault.id]
        assert fault.hits >= faults[0]["hits"] >= 1  # the count the broker keeps, read later by the handle
        status, answer = post(url, f"api/faults/{broker.node_id}/{fault.id}/clear")  # its heal button
        assert (status, answer["fault"]["id"]) == (200, fault.id)
        assert get(url, "api/faults") == {"faults": []} and not fault.active
        assert post(url, f"api/faults/{broker.node_id}/{fault.id}/clear")[0] == 400  # no longer there

        metrics = get(url, "api/metrics")["brokers"]
        assert metrics[0]["node_id"] == broker.node_id
        assert metrics[0]["requests_total"]["Produce"] >= 1
        assert metrics[0]["total_time_ms_count"]["Produce"] == metrics[0]["requests_total"]["Produce"]
        assert metrics[0]["bytes_in"] >= 5 * len(b"v0") and metrics[0]["bytes_out"] >= 5 * len(b"v0")
        assert get(url, "api/transactions") == {"transactions": []}

        status, answer = post(url, "api/brokers/1/kill")  # a lone broker has no buttons
        assert status == 400 and "Cluster" in answer["error"]
        assert broker.running


def test_cluster_buttons_kill_and_restart_a_broker() -> None:
    with minikafka.Cluster(3, ui=True) as cluster:
        cluster.state.create_topic("events", partitions=1, replication_factor=3)
        cluster.wait_for_isr("events", 0, 3)
        victim = next(b for b in cluster.brokers if b.node_id != cluster.leader_of("events", 0).node_id)
        status, answer = post(cluster.ui_url, f"api/brokers/{victim.node_id}/kill")
        assert (status, answer["action"]) == (200, "kill")
        assert not victim.running
        cluster.wait_for_isr("events", 0, 2)
        shown = get(cluster.ui_url, "api/topics")["topics"][0]["partitions"][0]
        assert victim.node_id not in shown["isr"] and shown["under_replicated"] is True
        status, _ = post(cluster.ui_url, f"api/brokers/{victim.node_id}/restart")
        assert status == 200 and victim.running
        cluster.wait_for_isr("events", 0, 3)
        assert post(cluster.ui_url, "api/brokers/9/kill")[0] == 400
        # Cut a link and pause a broker's fetching from the page, then heal everything with one button.
        assert post(cluster.ui_url, "api/links/1/2/cut")[0] == 200
        assert post(cluster.ui_url, "api/brokers/3/pause-fetching")[0] == 200
        assert {f["node_id"] for f in get(cluster.ui_url, "api/faults")["faults"]} == {1, 2, 3}
        status, answer = post(cluster.ui_url, "api/faults/clear")
        assert status == 200 and answer["cleared"] >= 2  # clearing a cut at one end may heal the other end first
        assert get(cluster.ui_url, "api/faults") == {"faults": []}
        cluster.wait_for_replicas_caught_up("events")


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_chromium() is None or shutil.which("chromedriver") is None,
                    reason="chromium and chromium-driver are not installed (CI installs them: .ci/run)")
def test_page_in_a_browser_kills_a_broker_and_shows_the_isr_shrink(tmp_path: Path) -> None:
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = _chromium()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1600"):
        options.add_argument(argument)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    with minikafka.Cluster(3, ui=True) as cluster:
        cluster.state.create_topic("events", partitions=1, replication_factor=3)
        cluster.wait_for_isr("events", 0, 3)
        driver = webdriver.Chrome(options=options, service=service)
        try:
            # The page rewrites its tables at every refresh: an element found just before may be gone when used.
            wait = WebDriverWait(driver, DEADLINE_S, ignored_exceptions=[StaleElementReferenceException])
            driver.get(cluster.ui_url)
            row = (By.CSS_SELECTOR, "#p-events-0 .isr")
            expected = cluster.state.partition("events", 0)
            wait.until(lambda d: d.find_element(*row).text == ",".join(map(str, expected.isr)))
            cells = wait.until(lambda d: [c.text for c in d.find_elements(By.CSS_SELECTOR, "#p-events-0 td")])
            assert cells[:4] == ["events", "0", str(expected.leader), ",".join(map(str, expected.replicas))]
            assert cells[5] == str(expected.high_watermark)

            victim = next(b for b in cluster.brokers if b.node_id != expected.leader)
            wait.until(lambda d: d.find_element(By.ID, f"kill-{victim.node_id}").click() or True)
            wait.until(expected_conditions.alert_is_present()).accept()
            remaining = ",".join(str(r) for r in expected.isr if r != victim.node_id)
            wait.until(lambda d: d.find_element(*row).text == remaining)
            assert not victim.running
            wait.until(lambda d: "under-replicated" in d.find_element(By.ID, "p-events-0").get_attribute("class"))
            shot = Path(os.environ.get("MINIKAFKA_SCREENSHOT_DIR", tmp_path)) / "status-page.png"
            shot.parent.mkdir(parents=True, exist_ok=True)
            assert driver.save_screenshot(str(shot))
        finally:
            driver.quit()


def test_serve_ui_port_serves_the_page_of_the_broker_it_runs(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--port", "0", "--data-dir",
                             str(tmp_path / "data"), "--ui-port", "0", "--log-level", "WARNING"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        bootstrap = url = None
        deadline = time.monotonic() + DEADLINE_S
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline() if proc.stdout else ""
            if not line:
                break
            if found := re.match(r"minikafka listening on (\S+)", line):
                bootstrap = found.group(1)
            if found := re.match(r"minikafka status page at (\S+)", line):
                url = found.group(1)
        assert bootstrap is not None and url is not None and url.startswith("http://127.0.0.1:")
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        producer.send("served", b"x").get(timeout=30)
        producer.close()
        topics = {t["name"]: t for t in get(url, "api/topics")["topics"]}
        assert topics["served"]["partitions"][0]["high_watermark"] == 1
        assert get(url, "api/cluster")["brokers"][0]["running"] is True
        proc.send_signal(signal.SIGINT)
        assert proc.wait(DEADLINE_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(DEADLINE_S)


def test_cluster_ui_port_serves_the_page_and_its_kill_button(tmp_path: Path) -> None:
    from tests.integration.test_cluster_handle import READY_LINE, cluster_command, read_until

    with cluster_command("--brokers", "2", "--ui-port", "0", "--data-dir", str(tmp_path / "data")) as (proc,
                                                                                                     node_pids):
        assert proc.stdout is not None
        text = read_until(proc.stdout, b"minikafka status page at ", DEADLINE_S)
        text += read_until(proc.stdout, b"\n", DEADLINE_S) if not text.endswith(b"\n") else b""
        pids = {int(m.group(2)): int(m.group(3)) for m in map(READY_LINE.search, text.decode().splitlines()) if m}
        node_pids += pids.values()
        url = re.search(r"minikafka status page at (\S+)", text.decode())
        assert url is not None and sorted(pids) == [1, 2]
        shown = get(url.group(1), "api/cluster")
        assert [(b["node_id"], b["running"]) for b in shown["brokers"]] == [(1, True), (2, True)]
        assert shown["can_kill"] is True
        assert post(url.group(1), "api/brokers/2/kill")[0] == 200
        assert [b["running"] for b in get(url.group(1), "api/cluster")["brokers"]] == [True, False]
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=DEADLINE_S)


def test_a_share_groups_in_flight_records_are_on_the_page() -> None:
    from tests.clients.test_share_fetch import set_group_config
    from tests.helpers import produce_acked
    from tests.share_consumer import ShareConsumer, ShareMember, heartbeat_until, new_member_id, topic_id

    with minikafka.Broker(ui=True) as broker:
        bootstrap = broker.bootstrap_servers
        broker.state.create_topic("jobs", partitions=1, replication_factor=1)
        set_group_config([bootstrap], "crew", "share.auto.offset.reset", "earliest")
        produce_acked(bootstrap, "jobs", 5, partitions=1)
        tid = topic_id(bootstrap, "jobs")
        member = ShareMember(bootstrap, "crew", ["jobs"], member_id=new_member_id())
        heartbeat_until([member], lambda: member.assignment.get(tid), DEADLINE_S, "the partition assigned")
        consumer = ShareConsumer(bootstrap, "crew", member_id=member.member_id)
        try:
            deadline = time.monotonic() + DEADLINE_S
            acquired: set[int] = set()
            while len(acquired) < 5:  # acquired, not acknowledged: in flight
                assert time.monotonic() < deadline, acquired
                acquired |= set(consumer.fetch([(tid, 0)], max_wait_ms=200).records.get((tid, 0), {}))
            (group,) = [g for g in get(broker.ui_url, "api/groups")["groups"] if g["group_id"] == "crew"]
            assert (group["group_type"], [m["member_id"] for m in group["members"]]) == ("share", [member.member_id])
            assert group["share_partitions"] == [{"topic": "jobs", "partition": 0, "start_offset": 0,
                                                  "end_offset": 5, "in_flight": {"ACQUIRED": 5},
                                                  "max_delivery_count": 1}]
        finally:
            consumer.close()
            consumer.conn.close()
            member.close()
