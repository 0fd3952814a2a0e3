#!/usr/bin/env python3
"""tetra serve's JSON API against the CLI's own output, and its defences.

Each endpoint's answer is compared with what the tetra command prints for the same settings:
/api/plan with `tetra plan --json` (and its timeline with `tetra plot --schedule`), its
refusals with tetra plan's error line, /api/lessons with `tetra lab --list`, a lesson's run
with `tetra lab NAME --answer X`, a run's bytes with the plan's. Then the defences: the Host
check, the token, oversize and malformed requests, a fuzz of random requests (each answered
with a status code, none 5xx, the server alive after), a second run while one runs, a run
stopped when its event stream closes, and SIGTERM stopping the server and its run. Standard
library only.

Usage: serve_api.py TETRA_BINARY
"""

import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

TETRA = sys.argv[1]
# A 4-rank run small enough for CI: two layers of width 32, 16 tokens, 4 sequences.
TINY = {"model": {"layers": 2, "dim": 32, "heads": 2, "kv_heads": 2, "ffn_dim": 64, "seq_len": 16},
        "batch": {"global_batch": 4}}
FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def start_server(tmp, *args):
    env = dict(os.environ, TMPDIR=tmp)
    proc = subprocess.Popen([TETRA, "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    line = proc.stdout.readline()
    m = re.match(r"tetra serve: http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]{32})$", line.strip())
    if not m:
        proc.kill()
        sys.exit(f"tetra serve printed {line!r}")
    return proc, int(m.group(1)), m.group(2)


class Api:
    def __init__(self, port, token):
        self.port, self.token = port, token

    def request(self, method, path, body=None, headers=None, host=None, timeout=30):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Host": host if host is not None else f"127.0.0.1:{self.port}"}
        h.update(headers or {})
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        text = r.read().decode()
        c.close()
        return r.status, r.getheader("Content-Type", ""), text

    def json(self, method, path, body=None, **kw):
        status, _, text = self.request(method, path, body, **kw)
        return status, json.loads(text)

    def events(self, path, body, token=True, on_event=None, timeout=120):
        """The run's events as (name, data) pairs, to the end of the stream; on_event(name, data,
        connection) may close the connection and return True to stop reading."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Host": f"127.0.0.1:{self.port}"}
        if token:
            h["X-Tetra-Token"] = self.token
        c.request("POST", path, body=json.dumps(body), headers=h)
        r = c.getresponse()
        if r.status != 200:
            out = (r.status, json.loads(r.read().decode()))
            c.close()
            return out
        events, block = [], []
        while True:
            line = r.fp.readline()
            if not line:
                break
            line = line.decode().rstrip("\n")
            if line:
                block.append(line)
                continue
            name = data = None
            for b in block:
                if b.startswith("event: "):
                    name = b[7:]
                elif b.startswith("data: "):
                    data = json.loads(b[6:])
            block = []
            if name:
                events.append((name, data))
                if on_event and on_event(name, data, c):
                    return 200, events
        c.close()
        return 200, events


def cli(*args):
    return subprocess.run([TETRA, *args], capture_output=True, text=True)


def flags(settings):
    out = []
    for section, values in settings.items():
        for name, v in values.items():
            flag = "--" + name.replace("_", "-")
            if v is True:
                out.append(flag)
            elif v is not False:
                out.append(f"{flag}={v}")
    return out


def plan_cli(settings):
    r = cli("plan", "--json", *flags(settings))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def trimmed(plan):
    ranks = plan["grid"]["ranks"]
    if isinstance(ranks, list):
        del ranks[512:]
    return plan


def endpoints(api, tmp):
    # The page's files, compiled into the binary, are the repository's.
    page = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "jobs", "serve_page")
    for name in sorted(os.listdir(page)):
        status, ctype, text = api.request("GET", "/" if name == "index.html" else "/" + name)
        with open(os.path.join(page, name), encoding="utf-8") as f:
            check(status == 200 and text == f.read() and "charset=utf-8" in ctype,
                  f"GET /{name}: the repository's jobs/serve_page/{name} ({ctype})")

    status, options = api.json("GET", "/api/options")
    defaults = plan_cli({})
    check(status == 200 and options["settings"]["layout"]["tp"] == defaults["run"]["layout"]["tp"]
          and options["settings"]["model"]["dim"] == defaults["model"]["dim"]
          and "data.data" not in options["keys"] and "output.metrics" not in options["keys"],
          "/api/options: the defaults are tetra plan's; no path is a setting the page gives")

    cases = [{"run": {"preset": "llama3-405b"}},
             {"run": {"preset": "llama3-405b"}, "layout": {"pp": 8}},
             {"run": {"preset": "demo"}, "layout": {"schedule": "interleaved", "vpp": 2}},
             dict(TINY, layout={"tp": 2, "pp": 2, "sp": True}, optimizer={"zero": 3},
                  device={"dtype": "bf16"})]
    for settings in cases:
        status, res = api.json("POST", "/api/plan", {"settings": settings})
        want = trimmed(plan_cli(settings))
        check(status == 200 and res["plan"] == want,
              f"/api/plan {flags(settings)}: the plan equals tetra plan --json's")
        check(res["command"].startswith("tetra plan")
              and sorted(res["command"].split()[2:]) == sorted(flags(settings)),
              f"/api/plan {flags(settings)}: the command line shown is the flags given")
        # The plan's text; the CLI's last line on flags that change no part of it is about a
        # command line, which the page has none of.
        text = "".join(line for line in cli("plan", *flags(settings)).stdout.splitlines(True)
                       if not line.startswith("given, and no part of a plan"))
        check(res["report"] == text, f"/api/plan {flags(settings)}: the text equals tetra plan's")
        b = res["plan"]["bubble"]
        if b["pp"] > 1:
            svg = os.path.join(tmp, "s.svg")
            cli("plot", "--schedule", b["schedule"], "--pp", str(b["pp"]), "--vpp", str(b["vpp"]),
                "--micro-batches", str(b["micro_batches"]), "--out", svg)
            with open(svg) as f:
                check(res["timeline"]["svg"] == f.read(),
                      f"/api/plan {flags(settings)}: the timeline is tetra plot --schedule's SVG")

    for bad, words in [({"layout": {"tp": 3}}, "tp 3"), ({"layout": {"tp": 0}}, "tp 0"),
                       ({"model": {"heads": "x"}}, "heads x"),
                       ({"layout": {"schedule": "zigzag"}}, "schedule zigzag")]:
        status, res = api.json("POST", "/api/plan", {"settings": bad})
        err = cli("plan", *flags(bad)).stderr.strip()
        check(status == 400 and "tetra: error: " + res["error"] == err,
              f"/api/plan refuses {words} with tetra plan's error line ({err})")
    for bad in [{"data": {"data": "/etc/passwd"}}, {"output": {"metrics": "/tmp/x"}},
                {"run": {"config": "/etc/passwd"}}, {"layout": "tp"}, ["layout"],
                {"layout": {"sp": "yes"}}, {"model": {"dim": [1]}}]:
        status, res = api.json("POST", "/api/plan", {"settings": bad})
        check(status == 400 and "error" in res, f"/api/plan refuses settings {json.dumps(bad)}: "
              f"{res.get('error')}")

    status, res = api.json("GET", "/api/lessons?lang=en")
    listed = [re.match(r"\s*\d+\. (\S+)\s+(.*)", l).groups() for l in
              cli("lab", "--list", "--lang", "en").stdout.splitlines()]
    check(status == 200 and [(l["name"], l["title"]) for l in res["lessons"]] == listed,
          "/api/lessons: tetra lab --list's names and titles")
    status, zh = api.json("GET", "/api/lessons?lang=zh")
    listed = [re.match(r"\s*\d+\. (\S+)\s+(.*)", l).groups() for l in
              cli("lab", "--list", "--lang", "zh").stdout.splitlines()]
    check(status == 200 and [(l["name"], l["title"]) for l in zh["lessons"]] == listed,
          "/api/lessons?lang=zh: tetra lab --list --lang zh's")
    status, lesson = api.json("GET", "/api/lesson?name=6nd&lang=en")
    lab = cli("lab", "6nd", "--answer", "1", "--lang", "en").stdout
    flat = " ".join(lab.split())
    check(status == 200 and " ".join(lesson["question"].split()) in flat
          and " ".join(lesson["idea"].split()) in flat, "/api/lesson: tetra lab's idea and question")
    status, a = api.json("POST", "/api/answer", {"lesson": "6nd", "answer": "1", "lang": "en"})
    check(status == 200 and a["right"] is False and ("hint" in a or "mistake" in a),
          "/api/answer: a wrong answer is diagnosed or given the hint")
    status, ev = api.events("/api/lesson/run", {"lesson": "6nd", "answers": ["1"], "lang": "en"})
    result = dict(ev).get("result", {})
    line = re.search(r"lab 6nd: answer 1 \| formula (\S+) \| measured (\S+) \| wrong", lab)
    formula_row = re.search(r"the formula\s+(.+)", lab).group(1).strip()
    check(status == 200 and result.get("formula") == formula_row and result.get("right") is False
          and line is not None, f"/api/lesson/run 6nd: graded as tetra lab grades it ({formula_row})")
    for path, want in [("/api/lesson?name=nope", 404), ("/api/lessons?lang=fr", 400),
                       ("/api/lesson?name=6nd&lang=xx", 400)]:
        status, res = api.json("GET", path)
        check(status == want and "error" in res, f"GET {path}: {want} with an error line")

    # A 4-rank run: its measured bytes are tetra plan's, and it matches one rank.
    settings = dict(TINY, layout={"tp": 2, "pp": 2})
    t0 = time.time()
    status, ev = api.events("/api/run", {"settings": settings, "steps": 3})
    names = [n for n, _ in ev]
    result = dict(ev).get("result", {})
    plan = plan_cli(settings)
    planned = {g["group"]: g["bytes"] for g in plan["traffic"]["groups"]}
    measured = {g: b.get("measured") for g, b in result.get("comm_bytes", {}).items()}
    steps = [d for n, d in ev if n == "step" and d["phase"] == "layout"]
    check(status == 200 and names[0] == "start" and "result" in names and len(steps) == 3,
          f"/api/run: start, 3 layout steps streamed, the result ({time.time() - t0:.1f} s)")
    check(measured == {g: int(b) for g, b in planned.items()},
          f"/api/run: measured bytes per group {measured} equal tetra plan --json's")
    check(result.get("matches") is True and result.get("plan_matches") is True,
          f"/api/run: matches one rank (gap {result.get('loss_gap')})")
    check(not os.listdir(tmp) or all(not n.startswith("tetra_serve") for n in os.listdir(tmp)),
          "/api/run: its temporary directory is removed")


def defences(api, tmp):
    for host in [f"evil.example:{api.port}", "127.0.0.1", f"127.0.0.1:{api.port + 1}", ""]:
        status, ctype, text = api.request("GET", "/api/options", host=host)
        check(status == 403 and "application/json" in ctype and "error" in json.loads(text),
              f"Host {host!r} refused with 403 and a JSON error")
    for host in [f"localhost:{api.port}", f"127.0.0.1:{api.port}"]:
        status, _, _ = api.request("GET", "/", host=host)
        check(status == 200, f"Host {host!r} served")

    body = {"settings": TINY, "steps": 1}
    for headers in [{}, {"X-Tetra-Token": "0" * 32}, {"X-Tetra-Token": api.token[:-1]}]:
        status, _, text = api.request("POST", "/api/run", body, headers=headers)
        check(status == 403 and "token" in json.loads(text)["error"],
              f"/api/run with token {headers.get('X-Tetra-Token')!r}: 403")
    status, _, text = api.request("POST", "/api/lesson/run", {"lesson": "6nd", "answers": ["1"]})
    check(status == 403, "/api/lesson/run without the token: 403")
    token = {"X-Tetra-Token": api.token}
    for bad, words in [({"settings": TINY, "steps": 0}, "steps 0"),
                       ({"settings": TINY, "steps": 10 ** 9}, "steps past --max-steps"),
                       ({"settings": TINY}, "no steps"),
                       ({"settings": dict(TINY, layout={"dp": 64}), "steps": 1}, "64 ranks"),
                       ({"settings": {"model": {"dim": 65536, "ffn_dim": 262144, "layers": 64}},
                         "steps": 1}, "a model past the memory bound"),
                       ({"settings": {"data": {"data": "/etc/passwd"}}, "steps": 1}, "a path")]:
        status, _, text = api.request("POST", "/api/run", bad, headers=token)
        check(status == 400 and "error" in json.loads(text),
              f"/api/run refuses {words}: {json.loads(text).get('error')}")

    status, ctype, text = api.request("POST", "/api/plan", "x" * (100 * 1024))
    check(status == 413 and "application/json" in ctype, "a 100 kB body: 413 with a JSON error")
    status, ctype, text = api.request("GET", "/api/lesson?name=" + "a" * 20000)
    check(400 <= status < 500 and "application/json" in ctype,
          f"a 20 kB request line: {status} with a JSON error")
    for raw in [b"GARBAGE\r\n\r\n", b"GET\r\n\r\n", b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
                b"POST /api/plan HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: -5\r\n\r\n" % api.port,
                b"\x00\xff\xfe" * 50 + b"\r\n\r\n"]:
        status, text = raw_request(api.port, raw)
        check(status is not None and 400 <= status < 500 and "error" in text,
              f"malformed {raw[:30]!r}: {status} with a JSON error")


def raw_request(port, raw, timeout=10):
    """Sends raw bytes, reads the answer to its end; (status, text), or (None, why)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(raw)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            m = re.search(rb"Content-Length: (\d+)", head)
            if m and len(rest) >= int(m.group(1)):
                break
    except socket.timeout:
        return None, "no answer within %d s" % timeout
    finally:
        s.close()
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", data)
    return (int(m.group(1)) if m else None), data.decode("utf-8", "replace")


def fuzz(api, n=1000, seed=27):
    """Random requests, each complete (its head ends, its body has its length): every one must
    get a status line within the timeout, none a 5xx, and the server must answer after."""
    rng = random.Random(seed)
    paths = ["/", "/page.js", "/api/options", "/api/plan", "/api/lessons", "/api/lesson",
             "/api/answer", "/api/run", "/api/lesson/run", "/api/status", "/nope", "/api/plan/x"]
    keys = ["run", "layout", "model", "batch", "optimizer", "device", "plan", "data", "output"]
    names = ["tp", "cp", "pp", "dp", "sp", "vpp", "schedule", "preset", "layers", "dim", "heads",
             "zero", "dtype", "gpu", "global_batch", "micro_batch", "metrics", "data", "x"]
    values = [0, 1, 2, 3, -1, 2 ** 31, 2 ** 63, 1e308, -0.5, "1", "", "x" * 100, "bf16", "gpipe",
              "llama3-405b", True, False, None, [], {}, "../../etc/passwd", "\u0000", "💥"]

    def body():
        kind = rng.random()
        if kind < 0.3:
            return bytes(rng.randrange(256) for _ in range(rng.randrange(200)))
        settings = {}
        for _ in range(rng.randrange(4)):
            settings.setdefault(rng.choice(keys), {})[rng.choice(names)] = rng.choice(values)
        doc = {"settings": settings if rng.random() < 0.9 else rng.choice(values),
               "lesson": rng.choice(["6nd", "dp", "x", 1, None]), "answer": rng.choice(values),
               "answers": rng.choice([[], ["1"], ["a", "b", "c"], "1", [1]]),
               "lang": rng.choice(["en", "zh", "xx", 1])}
        if rng.random() < 0.5:
            doc["steps"] = rng.choice(values)
        text = json.dumps(doc)
        if rng.random() < 0.2:  # cut short or doubled: malformed JSON
            text = text[: rng.randrange(len(text) + 1)] + text[: rng.randrange(10)]
        return text.encode()

    answered, bad = 0, []
    t0 = time.time()
    for i in range(n):
        kind = rng.random()
        method = rng.choice(["GET", "POST", "PUT", "DELETE", "OPTIONS", "HEAD", "FOO"])
        path = rng.choice(paths)
        if rng.random() < 0.3:
            path += "?" + "&".join(f"{rng.choice(['name', 'lang', 'token', 'x'])}="
                                   f"{rng.choice(['6nd', 'zh', 'en', '%00', '%zz', 'a' * 50])}"
                                   for _ in range(rng.randrange(4)))
        b = body()
        host = f"127.0.0.1:{api.port}" if rng.random() < 0.85 else rng.choice(
            ["evil:1", "", "127.0.0.1", "\x01"])
        if kind < 0.1:  # garbage head
            raw = bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 300))).replace(
                b"\r\n\r\n", b"") + b"\r\n\r\n"
        else:
            head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
            if rng.random() < 0.1:
                head += "X-Junk: " + "y" * rng.randrange(10000) + "\r\n"
            if path.endswith("/run") and rng.random() < 0.5:
                head += "X-Tetra-Token: " + rng.choice(["", "0" * 32, "zz"]) + "\r\n"
            raw = head.encode("latin-1", "replace") + b"Content-Length: %d\r\n\r\n" % len(b) + b
        status, text = raw_request(api.port, raw)
        if status is None or status >= 500:
            bad.append((raw[:80], status, text[:200]))
        else:
            answered += 1
    check(not bad, f"fuzz: {answered} of {n} random requests answered with a status code, none "
          f"5xx or unanswered ({time.time() - t0:.1f} s)" + (f"; first bad: {bad[0]}" if bad else ""))
    status, _ = api.json("GET", "/api/options")
    check(status == 200, "fuzz: the server answers after it")


def one_at_a_time(api, tmp):
    # A run long enough to be caught running: 8 ranks, 50 steps.
    slow = {"settings": dict(TINY, layout={"dp": 8}, batch={"global_batch": 8}), "steps": 50}
    second = {}

    def on_event(name, data, conn):
        if name == "step" and "status" not in second:
            status, res = api.json("POST", "/api/run", {"settings": TINY, "steps": 1},
                                   headers={"X-Tetra-Token": api.token})
            second["status"], second["error"] = status, res.get("error")
            status, st = api.json("GET", "/api/status")
            second["state"] = st["run"]
            conn.close()  # the page goes
            return True
        return False

    t0 = time.time()
    api.events("/api/run", slow, on_event=on_event)
    check(second.get("status") == 409 and "one at a time" in second.get("error", "")
          and second.get("state") == "running", f"a second run while one runs: 409 ({second})")
    state = None
    while time.time() - t0 < 60:
        state = api.json("GET", "/api/status")[1]["run"]
        if state == "idle":
            break
        time.sleep(0.2)
    stopped_in = time.time() - t0
    check(state == "idle", f"the run stopped when its event stream closed ({stopped_in:.1f} s)")
    left = [n for n in os.listdir(tmp) if n.startswith("tetra_serve")]
    check(not left, f"its temporary directory is removed ({left})")
    ps = subprocess.run(["pgrep", "-f", tmp], capture_output=True, text=True).stdout.split()
    check(not ps, "no process of the run is left")


def sigterm_stops(tmp):
    proc, port, token = start_server(tmp)
    api = Api(port, token)
    slow = {"settings": dict(TINY, layout={"dp": 4}), "steps": 50}

    def on_event(name, data, conn):
        if name == "step":
            proc.send_signal(signal.SIGTERM)
            return True
        return False

    t0 = time.time()
    api.events("/api/run", slow, on_event=on_event)
    try:
        rc = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = None
    left = [n for n in os.listdir(tmp) if n.startswith("tetra_serve")]
    check(rc == 0 and not left, f"SIGTERM during a run: the server exits 0 in "
          f"{time.time() - t0:.1f} s, the run's directory removed")


def main():
    with tempfile.TemporaryDirectory(prefix="serve_api_") as tmp:
        runs = os.path.join(tmp, "runs")
        os.mkdir(runs)
        proc, port, token = start_server(runs)
        api = Api(port, token)
        try:
            endpoints(api, tmp=runs)
            defences(api, runs)
            fuzz(api)
            one_at_a_time(api, runs)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                check(False, "the server stops on SIGTERM")
        sigterm_stops(runs)
        r = subprocess.run([TETRA, "serve", "--port", "0"], capture_output=True, text=True,
                           env=dict(os.environ, OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE="4"),
                           timeout=60)
        check(r.returncode == 2 and r.stderr.startswith("tetra: error: tetra serve was started as rank 0 of 4"),
              "a rank of an MPI job of 4 refuses to serve")
        r = subprocess.run([TETRA, "serve", "--host", "0.0.0.0"], capture_output=True, text=True)
        check(r.returncode == 2 and "--host" in r.stderr, "--host 0.0.0.0 is refused")
    print(f"{len(FAILURES)} failed" if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
