#!/usr/bin/env python3
"""tetra serve's page in a real browser (Debian's chromium, headless, driven by selenium).

Starts `tetra serve --port 0`, opens the address it prints, sets Llama 3 405B's layout (the
preset) and reads the memory and bubble the page shows, against `tetra plan --json` for the
same layout; changes PP and checks that the timeline and the figures follow; starts a 4-rank
run of a tiny model from the page, waits for its final record, and checks that the measured
bytes shown equal the plan's and that "matches one rank" is shown; then, in Chinese, a lesson of
tetra lab: its list, idea and question, a wrong answer given the lab's hint, a second try and
its result. Saves a screenshot of the planner (PNG) for the README.

Exit status 77 (ctest: skipped) where selenium, chromium or chromedriver is missing, unless
TETRA_REQUIRE_PYTHON_TESTS is set (as CI sets it): then 1.

Usage: serve_browser.py TETRA_BINARY SCREENSHOT.png
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TETRA, SHOT = sys.argv[1], sys.argv[2]
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def missing(what):
    if os.environ.get("TETRA_REQUIRE_PYTHON_TESTS"):
        print(f"serve_browser: {what} (TETRA_REQUIRE_PYTHON_TESTS is set)")
        sys.exit(1)
    print(f"serve_browser: {what}; skipped")
    sys.exit(77)


try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:
    missing("python3-selenium is not installed")
for path in (CHROMIUM, DRIVER):
    if not os.access(path, os.X_OK):
        missing(f"{path} is not installed (chromium, chromium-driver)")

FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def plan_cli(*args):
    r = subprocess.run([TETRA, "plan", "--json", *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def lab_cli(*args):
    r = subprocess.run([TETRA, "lab", *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def main():
    t_start = time.time()
    tmp = tempfile.mkdtemp(prefix="serve_browser_")
    server = subprocess.Popen([TETRA, "serve", "--port", "0"], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, TMPDIR=tmp))
    url = re.search(r"http://\S+", server.stdout.readline()).group(0)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1100", "--lang=en-US"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        run_page(driver, url)
    finally:
        driver.quit()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"serve_browser: {time.time() - t_start:.1f} s")
    print(f"{len(FAILURES)} failed" if FAILURES else "all passed")
    return 1 if FAILURES else 0


def run_page(driver, url):
    wait = WebDriverWait(driver, 60)
    find = lambda css: driver.find_element(By.CSS_SELECTOR, css)
    plans = lambda: int(find("body").get_attribute("data-plans") or 0)

    def after_change(change):
        """Makes a change to the form and waits for the page's next plan."""
        n = plans()
        change()
        wait.until(lambda d: plans() > n)

    def set_number(key, value):
        e = find(f'[data-key="{key}"]')
        e.clear()
        e.send_keys(str(value))

    driver.get(url)
    wait.until(lambda d: plans() >= 1)
    check(find("#plan-command").text == "tetra plan", "the page opens with tetra plan's defaults")

    # Llama 3 405B: the page's memory and bubble are tetra plan's.
    after_change(lambda: Select(find('[data-key="run.preset"]')).select_by_value("llama3-405b"))
    want = plan_cli("--preset", "llama3-405b")
    memory = float(find("#fig-memory").get_attribute("data-value"))
    bubble = float(find("#fig-bubble").get_attribute("data-value"))
    check(memory == want["memory"]["peak_bytes"],
          f"405B: memory per rank shown {find('#fig-memory').text} = tetra plan's "
          f"{want['memory']['peak_bytes']:.0f} B")
    check(bubble == want["bubble"]["of_step"],
          f"405B: bubble shown {find('#fig-bubble').text} = tetra plan's {want['bubble']['of_step']}")
    check(find('[data-key="layout.pp"]').get_attribute("value") == "16"
          and find('[data-key="layout.pp_balance"]').get_attribute("value") == "ends"
          and find("#fig-ranks").text == "16,384",
          "405B: the preset's layout (PP 16, its ends a layer lighter), 16,384 ranks")
    boxes16 = len(driver.find_elements(By.CSS_SELECTOR, "#timeline svg .F"))
    stages16 = len(driver.find_elements(By.CSS_SELECTOR, "#memory .bar"))
    check(boxes16 == 16 * want["batch"]["micro_batches"] and stages16 == 16,
          f"405B: the timeline has {boxes16} forward boxes, the memory {stages16} stages")
    # A rank of the grid shows its coordinates, layers, token positions and groups (each named
    # by its first member), as the plan's grid has them.
    find('#grid [data-rank="200"]').click()
    info, r200 = find("#rank-info").text, want["grid"]["ranks"][200]
    stage = want["grid"]["stages"][r200["pp"]]["label"]
    firsts = [f"{d} {{{r200['groups'][d]}," for d in ("tp", "pp", "dp")]
    check(f"tp {r200['tp']}, cp {r200['cp']}, pp {r200['pp']}, dp {r200['dp']}" in info
          and stage in info and want["grid"]["cp_ranks"][0]["label"] in info
          and all(f in info for f in firsts), f"405B: rank 200 shows {info}")
    driver.save_screenshot(SHOT)
    check(os.path.getsize(SHOT) > 10000, f"screenshot saved: {SHOT} ({os.path.getsize(SHOT)} B)")

    # PP 8: the timeline and the figures follow.
    timeline16 = find("#timeline").get_attribute("innerHTML")
    after_change(lambda: set_number("layout.pp", 8))
    want8 = plan_cli("--preset", "llama3-405b", "--pp", "8")
    boxes8 = len(driver.find_elements(By.CSS_SELECTOR, "#timeline svg .F"))
    check(find("#timeline").get_attribute("innerHTML") != timeline16
          and boxes8 == 8 * want8["batch"]["micro_batches"],
          f"PP 8: the timeline is redrawn ({boxes8} forward boxes)")
    check(float(find("#fig-memory").get_attribute("data-value")) == want8["memory"]["peak_bytes"]
          and float(find("#fig-bubble").get_attribute("data-value")) == want8["bubble"]["of_step"]
          and want8["bubble"]["of_step"] != want["bubble"]["of_step"],
          f"PP 8: memory {find('#fig-memory').text} and bubble {find('#fig-bubble').text} "
          "are tetra plan --pp 8's")
    check(len(driver.find_elements(By.CSS_SELECTOR, "#memory .bar")) == 8, "PP 8: 8 stages drawn")

    # A 4-rank run of a tiny model from the page.
    after_change(lambda: Select(find('[data-key="run.preset"]')).select_by_value(""))
    tiny = {"model.layers": 2, "model.dim": 32, "model.heads": 2, "model.kv_heads": 2,
            "model.ffn_dim": 64, "model.seq_len": 16, "batch.global_batch": 4, "layout.tp": 2,
            "layout.pp": 2}
    for key, value in tiny.items():
        after_change(lambda: set_number(key, value))
    Select(find('[data-key="plan.gpu"]')).select_by_value("cpu")
    want_run = plan_cli("--layers", "2", "--dim", "32", "--heads", "2", "--kv-heads", "2",
                        "--ffn-dim", "64", "--seq-len", "16", "--global-batch", "4", "--tp", "2",
                        "--pp", "2", "--gpu", "cpu")
    find('[data-tab="run"]').click()
    check(find("#run").is_displayed() and not find("#planner").is_displayed(),
          "the Run tab shows its page alone")
    steps = find("#run-steps")
    steps.clear()
    steps.send_keys("3")
    t0 = time.time()
    find("#run-start").click()
    WebDriverWait(driver, 180).until(lambda d: find("#run-match").get_attribute("data-matches"))
    took = time.time() - t0
    rows = driver.find_elements(By.CSS_SELECTOR, "#run-result .bytes-row")
    shown = {r.get_attribute("data-group"): (int(r.get_attribute("data-planned")),
                                             int(r.get_attribute("data-measured"))) for r in rows}
    planned = {g["group"]: int(g["bytes"]) for g in want_run["traffic"]["groups"] if g["bytes"] > 0}
    check(shown and all(p == m for p, m in shown.values())
          and {g: p for g, (p, m) in shown.items()} == planned,
          f"the run's measured bytes shown {shown} equal tetra plan's {planned} ({took:.1f} s)")
    match = find("#run-match")
    check(match.get_attribute("data-matches") == "true" and "matches one rank" in match.text,
          f"the page shows: {match.text}")
    losses = driver.find_elements(By.CSS_SELECTOR, "#run-loss polyline")
    splits = driver.find_elements(By.CSS_SELECTOR, "#run-split .split-compute")
    check(len(losses) == 2 and len(splits) == 3,
          f"the loss curves ({len(losses)}) and the step split ({len(splits)} steps) are drawn")

    # A lesson in Chinese: tetra lab's list and texts, an answer diagnosed, a second try, the
    # result beside the formula.
    Select(find("#lang")).select_by_value("zh")
    find('[data-tab="lessons"]').click()
    listed = [": ".join(re.match(r"\s*\d+\. (\S+)\s+(.*)", l).groups())
              for l in lab_cli("--list", "--lang", "zh").splitlines()]
    buttons = lambda: [b.text for b in driver.find_elements(By.CSS_SELECTOR, "#lesson-list button")]
    wait.until(lambda d: len(buttons()) == len(listed))
    check(not find("#run").is_displayed() and not find("#planner").is_displayed(),
          "the Lessons tab shows its page alone")
    check(buttons() == listed, f"lessons: tetra lab --list --lang zh's {len(listed)} lessons")
    find('[data-lesson="6nd"]').click()
    wait.until(lambda d: find("#lesson-question").text)
    lab = lab_cli("6nd", "--answer", "1", "--answer", "66.9", "--lang", "zh")
    flat = "".join(lab.split())
    check("".join(find("#lesson-question").text.split()) in flat
          and "".join(find("#lesson-idea").text.split()) in flat,
          f"lesson 6nd: the idea and question are tetra lab's ({find('#lesson-question').text})")
    find("#lesson-answer").send_keys("1")
    find("#lesson-submit").click()
    wait.until(lambda d: find("#lesson-feedback").get_attribute("data-right") == "false")
    hint = re.search(r"提示：(\S+)", lab).group(1)
    check(hint in find("#lesson-feedback").text,
          f"lesson 6nd: a wrong answer gets tetra lab's hint ({find('#lesson-feedback').text})")
    find("#lesson-answer").send_keys("66.9")
    find("#lesson-submit").click()
    wait.until(lambda d: find("#lesson-run").is_displayed())
    find("#lesson-run").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#lesson-table"))
    formula = re.search(r"公式\s+(.+)", lab).group(1).strip()
    rows = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#lesson-table tr")]
    check(any(formula in r for r in rows) and "good" in find("#lesson-result .verdict")
          .get_attribute("class"), f"lesson 6nd: right at the second try, the formula {formula}")


if __name__ == "__main__":
    sys.exit(main())
