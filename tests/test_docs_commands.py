"""Every command README.md and docs/ give runs as written.

The commands are read from the markdown files themselves, so a new or changed command is tested
without anyone listing it here:

* a line of a fenced block that starts with a program (``luigi --module tasks``, ``daybreak``,
  ``python``, ``bin/test``, ``systemctl``; a leading ``$ `` is a prompt), and an inline code span
  that does;
* a crontab line (five time fields) and its variables;
* a systemd unit (a block that starts with ``[Unit]``).

How each is checked:

* the README's "Try it" block (virtualenv, install, sample data, backfills, status) is run first, as one
  ``bash`` script with ``set -e``, from the root of a fresh clone of the repository (its working tree,
  uncommitted changes included), in a user's environment (no virtualenv active);
* docs/scale-out.md's "Try it on one machine" block (radosgw, buckets, luigid, two hosts) is run the same
  way in that clone, on ports of the test's own (its ``S3_PORT``/``LUIGID_PORT``), then its stop block;
  the page's luigi.cfg is pasted with only the endpoint and the bucket changed and runs;
* every ``ini`` block is a luigi.cfg: it is read and checked as Daybreak checks one, without the disk or
  the network (``tasks.settings_check.file_errors``), and Luigi's own keys in it parse;
* every other runnable command is then run with ``bash -c`` exactly as written, in that clone, with
  its virtualenv's scripts on the PATH; a command without ``--local-scheduler`` finds a real luigid
  through ``$LUIGI_CONFIG_PATH`` (docs/scale-out.md);
* a synopsis (placeholders such as ``DATASET``, ``<Family>``, ``[--json]``) is not runnable: each of
  its options must exist (argparse for ``daybreak``, the task's parameters for ``luigi``);
* ``bin/test ...`` is not run from inside the tests: the same arguments must select tests
  (``pytest --collect-only``; ``--fast`` is bin/test's ``-m "not system"``), bin/test must be executable,
  and .ci/run must call it;
* a benchmark runs for minutes and never in CI (benchmarks/README.md): its ``--help`` must work;
* a bare ``daybreak <command>`` (``daybreak plan``, ``daybreak demo``) is a mention of the command, checked
  as a synopsis; ``daybreak demo`` runs for minutes and tests/test_demo.py runs it;
* the crontab line and the systemd service are run as cron and systemd would run them (``sh -c``
  with cron's environment; ExecStart in WorkingDirectory), with the install path ``/srv/daybreak``
  replaced by the clone; the units pass ``systemd-analyze verify`` where it exists.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import radosgw
from tests.conftest import REPO
from tests.luigid import Luigid

pytestmark = pytest.mark.luigi

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PROGRAM = re.compile(r"^(luigi --module tasks \S|daybreak \S|python3? \S|bin/test\b|systemctl |duckdb )")
PLACEHOLDER = re.compile(r"<[^>]*>|\[|\b[A-Z]+\b|\.\.\.")  # <Family>, [--json], DATASET, A, B, N, ...
CRON = re.compile(r"^([\d*/,-]+ ){5}(?P<command>.+)$")
ENV_ASSIGNMENT = re.compile(r"^(\w+=\S*\s+)+")
INSTALL_PATH = "/srv/daybreak"  # docs/operations.md's deployment folder: the clone in these tests
# documented exit status of commands that do not end in 0 on the sample data (docs/operations.md):
# 20, a raw folder has not arrived (the sample has no exports for today); plan: 0 nothing to do, 1 work,
# 20 only waiting for raw data
EXPECTED_EXIT = [("MorningRefresh", {20}), ("daybreak plan ", {0, 1, 20}), ("--days-back 7", {0, 20})]


@dataclass(frozen=True)
class Documented:
    where: str  # file:line
    kind: str  # script | script line | command | synopsis | bin/test | benchmark | systemctl | cron | unit |
    # trial | trial stop | luigi.cfg
    text: str
    env: tuple[tuple[str, str], ...] = ()


def try_it_fence(text: str) -> re.Match | None:
    """The README's "Try it" block: the first ``sh`` block after the heading."""
    heading = re.search(r"^## Try it$", text, re.M)
    return re.compile(r"^```sh\n(.*?)^```", re.S | re.M).search(text, heading.end()) if heading else None


def scale_out_fences(text: str) -> list[re.Match]:
    """docs/scale-out.md's "Try it on one machine": its first ``sh`` block (the trial) and its second (the stop)."""
    heading = re.search(r"^## Try it on one machine$", text, re.M)
    if heading is None:
        return []
    return list(re.compile(r"^```sh\n(.*?)^```", re.S | re.M).finditer(text, heading.end()))[:2]


def documented() -> list[Documented]:
    found: list[Documented] = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(REPO)
        fences = list(re.finditer(r"^ *```(\w*)\n(.*?)^ *```", text, re.S | re.M))  # list items indent theirs
        try_it = try_it_fence(text) if path.name == "README.md" else None
        trial = {f.start(): kind for f, kind in zip(scale_out_fences(text), ("trial", "trial stop"), strict=False)}
        for fence in fences:
            first = text.count("\n", 0, fence.start(2)) + 1
            body = "\n".join(line.strip() for line in fence.group(2).splitlines())
            shell = fence.group(1) in ("sh", "bash", "shell", "console")
            if path.name == "scale-out.md" and fence.start() in trial:  # a script, run whole by its own test
                found.append(Documented(f"{rel}:{first}", trial[fence.start()], fence.group(2)))
                continue
            if fence.group(1) == "ini":
                found.append(Documented(f"{rel}:{first}", "luigi.cfg", fence.group(2)))
                continue
            if body.startswith("[Unit]"):
                found.append(Documented(f"{rel}:{first}", "unit", body))
                continue
            if try_it is not None and fence.start() == try_it.start():  # run as one script, first
                found.append(Documented(f"{rel}:{first}", "script", body))
                found += [
                    Documented(f"{rel}:{first + k}", "script line", line)
                    for k, line in enumerate(body.splitlines())
                    if PROGRAM.match(line)
                ]
                continue
            env = tuple(tuple(x.split("=", 1)) for x in body.splitlines() if re.match(r"^[A-Z_]+=\S+$", x))
            for k, line in enumerate(body.splitlines()):
                if cron := CRON.match(line):
                    found.append(Documented(f"{rel}:{first + k}", "cron", cron.group("command"), env))
                elif not shell and not line.startswith("$ "):
                    continue  # output, a config file: only a line with a prompt is a command
                elif (command := line.removeprefix("$ ").strip()) and PROGRAM.match(ENV_ASSIGNMENT.sub("", command)):
                    found.append(classify(f"{rel}:{first + k}", command))
        prose = text
        for fence in reversed(fences):
            prose = prose[: fence.start()] + "\n" * fence.group(0).count("\n") + prose[fence.end() :]
        for span in re.finditer(r"`([^`]+)`", prose):
            command = " ".join(span.group(1).split())  # a span may wrap across lines
            if PROGRAM.match(command):
                found.append(classify(f"{rel}:{prose.count(chr(10), 0, span.start()) + 1}", command))
    return found


def classify(where: str, command: str) -> Documented:
    if ENV_ASSIGNMENT.sub("", command).startswith("bin/test"):
        return Documented(where, "bin/test", command)
    if command.startswith(("python benchmarks/", "python3 benchmarks/")):
        return Documented(where, "benchmark", command)
    if command.startswith("systemctl "):
        return Documented(where, "systemctl", command)
    if re.fullmatch(r"daybreak \w+", command):
        return Documented(where, "synopsis", command)  # a mention of the subcommand, e.g. "`daybreak plan` says"
    if PLACEHOLDER.search(command.replace("-c ", "", 1) if command.startswith("python") else command):
        return Documented(where, "synopsis", command)
    return Documented(where, "command", command)


ALL = documented()
TRY_IT = next(d for d in ALL if d.kind == "script")


def runnable() -> list[Documented]:
    seen, out = set(), []
    for d in ALL:
        if d.kind == "command" and d.text not in seen:
            seen.add(d.text)
            out.append(d)
    return out


def expected_exit(command: str) -> set[int]:
    return next((codes for key, codes in EXPECTED_EXIT if key in command), {0})


# -- the clone ---------------------------------------------------------------------------------------
def fresh_clone(dest: Path) -> Path:
    """``git clone`` of the repository, with the working tree's uncommitted changes copied over, staged
    or not (so that what is tested is what is in front of you)."""
    subprocess.run(["git", "clone", "-q", str(REPO), str(dest)], check=True, capture_output=True)
    listed = "".join(
        subprocess.run(cmd, cwd=REPO, capture_output=True, check=True).stdout.decode()
        for cmd in (
            ["git", "ls-files", "-m", "-o", "--exclude-standard", "-z"],  # changed, and new untracked
            ["git", "diff", "--cached", "--name-only", "-z"],  # staged, new files included
        )
    )
    for rel in filter(None, listed.split("\0")):
        if (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    return dest


def clean_env() -> dict[str, str]:
    """The environment of a user's shell: no virtualenv active, no test settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "LUIGI_CONFIG_PATH", "PYTHONPATH")}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


@pytest.fixture(scope="module")
def docs_lab(tmp_path_factory):
    """A fresh clone in which the README's "Try it" block ran as a script; then a luigid for the
    commands that go to a central scheduler."""
    root = tmp_path_factory.mktemp("docs")
    clone = fresh_clone(root / "daybreak")
    script = "set -e\n" + TRY_IT.text + "\n"
    proc = subprocess.run(
        ["bash", "-c", script], cwd=clone, env=clean_env(), capture_output=True, text=True, timeout=1800
    )
    assert proc.returncode == 0, f"{TRY_IT.where}: the Try it block\n{TRY_IT.text}\n{proc.stderr[-3000:]}"
    server = Luigid(root / "luigid").start()
    central = root / "central.cfg"
    central.write_text(f"[core]\ndefault-scheduler-host = 127.0.0.1\ndefault-scheduler-port = {server.port}\n")
    env = clean_env()
    env["VIRTUAL_ENV"] = str(clone / ".venv")
    env["PATH"] = f"{clone / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"
    env["LUIGI_CONFIG_PATH"] = str(central)
    yield clone, env, proc
    server.stop()


@pytest.mark.system
def test_the_readme_try_it_block_works_from_a_fresh_clone(docs_lab):
    clone, _env, proc = docs_lab
    assert (clone / ".venv" / "bin" / "daybreak").exists()
    assert "stg_qsr_pos" in proc.stdout and "otb_by_stay_date  (unpartitioned)  ok" in proc.stdout  # daybreak status
    assert len(proc.stderr.splitlines()) < 200, proc.stderr[-3000:]  # progress lines and summaries only


def test_the_readme_try_it_block_is_one_command_a_line_each_with_a_comment():
    lines = TRY_IT.text.splitlines()
    assert lines[0].startswith("#") and "python3 -m venv .venv" in lines[1]  # it installs what it runs
    wanted = [
        "daybreak sample ",
        "luigi --module tasks RangeDaily --of StgQsrPos ",
        "luigi --module tasks RangeDaily --of AdsRolling7d ",
        "luigi --module tasks OtbByStayDate ",
        "daybreak status",
    ]
    commands = [k for k, line in enumerate(lines) if PROGRAM.match(line) and not line.startswith("python3 -m venv")]
    assert [next((w for w in wanted if lines[k].startswith(w)), lines[k]) for k in commands] == wanted, lines
    for k in commands:
        assert lines[k - 1].startswith("# ") and "&&" not in lines[k], lines[k - 1 : k + 1]


@pytest.mark.system
@pytest.mark.parametrize("doc", runnable(), ids=lambda d: f"{d.where} {d.text[:60]}")
def test_documented_command_runs_as_written(docs_lab, doc):
    clone, env, _ = docs_lab
    proc = subprocess.run(["bash", "-c", doc.text], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    where = f"{doc.where}: {doc.text}\n{proc.stdout[-1500:]}{proc.stderr[-3000:]}"
    assert proc.returncode in expected_exit(doc.text), where


@pytest.mark.system
def test_the_cron_line_runs_as_cron_runs_it(docs_lab):
    clone, env, _ = docs_lab
    (cron,) = [d for d in ALL if d.kind == "cron"]
    cron_env = {"HOME": env["HOME"], "PATH": "/usr/bin:/bin", "SHELL": "/bin/sh", **dict(cron.env)}  # cron's
    command = cron.text.replace(INSTALL_PATH, str(clone))
    proc = subprocess.run(["/bin/sh", "-c", command], env=cron_env, capture_output=True, text=True, timeout=900)
    assert proc.returncode in expected_exit(command), f"{cron.where}: {command}\n{proc.stderr[-3000:]}"
    log = re.search(r">> (\S+)", command).group(1)
    assert "summary of this run:" in (clone / log).read_text()


@pytest.mark.system
def test_the_systemd_units_verify_and_the_service_runs(docs_lab, tmp_path):
    clone, env, _ = docs_lab
    units = {}
    for doc in (d for d in ALL if d.kind == "unit"):
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        parser.optionxform = str
        parser.read_string(doc.text)
        units["daybreak-morning." + ("timer" if parser.has_section("Timer") else "service")] = (doc, parser)
    assert set(units) == {"daybreak-morning.service", "daybreak-morning.timer"}
    for d in (d for d in ALL if d.kind == "systemctl"):  # systemctl enable --now <unit>: a unit documented here
        assert all(word in units for word in d.text.split()[2:] if "." in word), d
    for name, (doc, _) in units.items():
        (tmp_path / name).write_text(doc.text.replace(INSTALL_PATH, str(clone)))
    if shutil.which("systemd-analyze"):
        verify = subprocess.run(
            ["systemd-analyze", "verify", *(str(tmp_path / n) for n in units)], capture_output=True, text=True
        )
        assert verify.returncode == 0 and "daybreak" not in verify.stderr, verify.stderr
    service = units["daybreak-morning.service"][1]["Service"]
    exec_start = service["ExecStart"].replace(INSTALL_PATH, str(clone))
    cwd = service["WorkingDirectory"].replace(INSTALL_PATH, str(clone))
    proc = subprocess.run(
        shlex.split(exec_start), cwd=cwd, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True
    )
    assert proc.returncode in expected_exit(exec_start), proc.stderr[-3000:]


@pytest.mark.system
@pytest.mark.parametrize("doc", [d for d in ALL if d.kind == "bin/test"], ids=lambda d: f"{d.where} {d.text}")
def test_documented_test_commands_select_tests(doc):
    """bin/test is the README's second command: not run from inside the tests (it would run them)."""
    assert os.access(REPO / "bin" / "test", os.X_OK)
    assert re.search(r"^bin/test$", (REPO / ".ci" / "run").read_text(), re.M)  # CI runs the README's command
    assert 'exec pytest -q -n 2 --dist loadfile ${args[@]+"${args[@]}"}' in (REPO / "bin" / "test").read_text()
    assert 'if [ "$a" = "--fast" ]' in (REPO / "bin" / "test").read_text()
    assert '-m "not system"' in (REPO / "bin" / "test").read_text()
    env_part = ENV_ASSIGNMENT.match(doc.text)
    args = shlex.split(doc.text[env_part.end() if env_part else 0 :])[1:]
    args = [x for a in args for x in (["-m", "not system"] if a == "--fast" else [a])]  # bin/test's --fast
    env = {**os.environ, **dict(x.split("=", 1) for x in (env_part.group(0).split() if env_part else []))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    selected = re.search(r"^(\d+)(/\d+)? tests? collected", proc.stdout, re.M)
    assert proc.returncode == 0 and selected and int(selected.group(1)) >= 1, proc.stdout[-2000:]


@pytest.mark.system
@pytest.mark.parametrize("doc", [d for d in ALL if d.kind == "benchmark"], ids=lambda d: f"{d.where} {d.text}")
def test_documented_benchmarks_start(doc):
    script = shlex.split(doc.text)[1]
    proc = subprocess.run([sys.executable, script, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize("doc", [d for d in ALL if d.kind == "synopsis"], ids=lambda d: f"{d.where} {d.text[:60]}")
def test_documented_synopses_name_real_options(doc):
    words = doc.text.replace("[", " ").replace("]", " ").replace("|", " ").split()
    options = {w.split("=")[0] for w in words if w.startswith("--")}
    if words[0] == "daybreak":
        from tasks.cli import build_parser

        commands = build_parser()._subparsers._group_actions[0].choices
        if not words[1].isidentifier():
            return  # daybreak ... | head: any command
        known = set(commands[words[1]]._option_string_actions)
        choices = {a.dest: a.choices for a in commands[words[1]]._actions if a.choices}
        for match in re.finditer(r"--(\w+) ([\w|]+\|[\w|]+)", doc.text):  # --dataset a|b|c: the real choices
            assert set(match.group(2).split("|")) == set(choices[match.group(1)]), doc
    else:
        import luigi.interface
        import luigi.task_register

        import tasks  # noqa: F401  (registers the task families)

        family = words[3] if len(words) > 3 else ""
        if not family.isidentifier():
            return  # luigi --module tasks <Family>, luigi --module tasks ...
        cls = luigi.task_register.Register.get_task_cls(family)
        known = {"--" + name.replace("_", "-") for name, _ in cls.get_params()}
        known |= {"--" + name.replace("_", "-") for name, _ in luigi.interface.core.get_params()}
    assert options <= known, f"{doc.where}: {doc.text}: unknown {options - known}"


def test_docs_stay_inside_the_repository():
    """Item 9: links and paths resolve in a clone; the data contract is docs/raw-zone.md."""
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        assert "../shared" not in text and "DESIGN.md" not in text, path
        for link in re.findall(r"\]\(([^)#\s]+)", text):
            if not re.match(r"\w+://", link):
                assert (path.parent / link).resolve().is_relative_to(REPO), (path, link)
                assert (path.parent / link).exists(), (path, link)
    assert "[docs/raw-zone.md](docs/raw-zone.md)" in (REPO / "README.md").read_text()


def test_readme_luigi_commands_need_no_central_scheduler():
    """A newcomer has no luigid: every luigi command of the README runs with the local scheduler."""
    readme = [d for d in ALL if d.where.startswith("README.md") and d.text.startswith("luigi ")]
    assert readme and all("--local-scheduler" in d.text for d in readme), [d.text for d in readme]


# -- luigi.cfg examples ----------------------------------------------------------------------------------
LUIGI_CFGS = [d for d in ALL if d.kind == "luigi.cfg"]


def luigi_value_errors(path: Path) -> list[str]:
    """Each value of Luigi's own sections ([core], [worker], [scheduler], [retcode], ...) that Luigi's parameter
    of that name does not parse (names with ``-`` or ``_``, and a parameter's old ``config_path`` name)."""
    import luigi.task_register

    import tasks

    tasks.register()
    parser = configparser.ConfigParser()
    parser.read(path)
    errors = []
    for section in parser.sections():
        try:
            cls = luigi.task_register.Register.get_task_cls(section)
        except luigi.task_register.TaskClassException:
            continue
        params = {}
        for name, param in cls.get_params():
            params[name] = param
            if getattr(param, "_config_path", None) and param._config_path["section"] == section:
                params[param._config_path["name"].replace("-", "_")] = param
        for key, value in parser.items(section, raw=True):
            param = params.get(key.replace("-", "_"))
            if param is not None:
                try:
                    param.parse(value)
                except (ValueError, TypeError) as exc:
                    errors.append(f"[{section}] {key} = {value!r}: {exc}")
    return errors


def test_the_docs_have_luigi_cfg_blocks_and_no_other_ini():
    assert {d.where.split(":")[0] for d in LUIGI_CFGS} >= {"docs/operations.md", "docs/scale-out.md"}
    for d in LUIGI_CFGS:  # a systemd unit or another format has a fence of its own (```systemd)
        assert "[Service]" not in d.text and "[Unit]" not in d.text, d.where


@pytest.mark.parametrize("doc", LUIGI_CFGS, ids=lambda d: d.where)
def test_every_ini_block_is_a_luigi_cfg_daybreak_reads(doc, tmp_path):
    """Syntax, inline comments, known keys and every value's rule, as every command checks them, without
    the disk or the network (a server's folders and hosts are examples: tasks/settings_check.py file_errors)."""
    from tasks.settings_check import file_errors

    cfg = tmp_path / "luigi.cfg"
    cfg.write_text(doc.text)
    assert file_errors(str(cfg)) == [], f"{doc.where}\n{doc.text}"
    assert luigi_value_errors(cfg) == [], f"{doc.where}\n{doc.text}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[daybreak]\nraw_root = s3://landing/pos          ; or a local folder\n", "inline comments are not allowed"),
        ("[s3]\nendpoint_url = rgw.internal:7480\n", "no http:// or https:// in front"),
        ("[daybreak]\nraw_root = /srv/raw\nraw_root = /srv/raw\n", "is set twice"),
        ("[qsr]\nsuspicious_qty_treshold = 25\n", "unknown setting [qsr] suspicious_qty_treshold"),
        ("[hotels]\nreference_file = /srv/nowhere/hotels.csv\n", None),  # a server's file: not looked for
    ],
)
def test_the_check_of_a_docs_block_fails_where_a_command_would(text, expected, tmp_path):
    from tasks.settings_check import file_errors

    cfg = tmp_path / "luigi.cfg"
    cfg.write_text(text)
    errors = file_errors(str(cfg))
    assert (expected is None and errors == []) or (len(errors) == 1 and expected in errors[0]), errors
    cfg.write_text("[core]\nscheduler_port = 80 82\n")
    assert luigi_value_errors(cfg) and luigi_value_errors(cfg)[0].startswith("[core] scheduler_port = '80 82'")


# -- docs/scale-out.md: trying it on one machine ---------------------------------------------------------
def scale_out_blocks() -> tuple[Documented, Documented, Documented]:
    (trial,) = [d for d in ALL if d.kind == "trial"]
    (stop,) = [d for d in ALL if d.kind == "trial stop"]
    (hosts,) = [d for d in LUIGI_CFGS if d.where.startswith("docs/scale-out.md")]
    return trial, stop, hosts


def test_the_trial_uses_the_luigi_cfg_of_the_page_with_its_endpoint_and_luigid_changed():
    trial, _stop, hosts = scale_out_blocks()
    here = configparser.ConfigParser(interpolation=None)
    here.read_string(re.search(r"<<EOF\n(.*?)^EOF$", trial.text, re.S | re.M).group(1))
    page = configparser.ConfigParser(interpolation=None)
    page.read_string(hosts.text)
    changed = {("s3", "endpoint_url"), ("core", "scheduler_host"), ("core", "scheduler_port")}
    for section in here.sections():
        for key, value in here.items(section):
            assert page.has_option(section, key), (section, key)
            assert (section, key) in changed or page.get(section, key) == value, (section, key)
    assert "luigid in the background (it needs no credentials" in trial.text


@pytest.mark.system
@pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})")
def test_the_scale_out_trial_runs_as_written_on_one_machine(docs_lab, tmp_path):
    """The page's first block, whole, in the clone the README's "Try it" made (so the sample line runs a
    second time), on ports of this test's own; then its luigi.cfg pasted into a folder of its own with only
    the endpoint changed (the buckets are the trial's) builds dates the trial did not; then the stop block."""
    clone, lab_env, _ = docs_lab
    trial, stop, hosts = scale_out_blocks()
    s3_port = radosgw.free_port()
    luigid_port = radosgw.free_port(avoid=(s3_port,))
    try_dir, pasted = tmp_path / "try", tmp_path / "pasted"
    pasted.mkdir()
    (pasted / "luigi.cfg").write_text(
        hosts.text.replace("http://rgw.internal:7480", f"http://127.0.0.1:{s3_port}")
    )  # the buckets keep their names: the trial made landing and lake
    env = {k: v for k, v in lab_env.items() if k != "LUIGI_CONFIG_PATH"}
    env |= {"TRY": str(try_dir), "S3_PORT": str(s3_port), "LUIGID_PORT": str(luigid_port)}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # cache_dir: not the user's
    paste = (
        f"(cd {pasted} && unset LUIGI_CONFIG_PATH && luigi --module tasks RangeDaily --of StgQsrPos --start 2026-09-11 "
        f"--stop 2026-09-14 --local-scheduler && daybreak status --dataset stg_qsr_pos --start 2026-09-01 "
        f'--stop 2026-09-14) > "$TRY/pasted.log" 2>&1 || {{ cat "$TRY/pasted.log" >&2; exit 9; }}\n'
    )
    # whatever fails, luigid and radosgw end with the script
    cleanup = (
        'trap \'kill $luigid 2>/dev/null || true; [ ! -e "$TRY/s3/local-s3.json" ] || bin/local-s3 stop --folder'
        ' "$TRY/s3"\' EXIT\n'
    )
    # which host built each partition, as the trial left them (before the paste builds more)
    built_by = (
        'daybreak status --json --dataset stg_qsr_pos --start 2026-09-01 --stop 2026-09-11 > "$TRY/built_by.json"\n'
    )
    script = "set -e\n" + cleanup + trial.text + built_by + "echo '--- pasted'\n" + paste + stop.text
    proc = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    logs = "".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(try_dir.glob("*.log")))
    assert proc.returncode == 0, f"{trial.where}\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}\n{logs}"
    assert "stg_qsr_pos  2026-09-01 .. 2026-09-10\n  ##########\n  10 ok" in proc.stdout, proc.stdout
    for host in ("host1", "host2"):
        assert "summary of this run:" in (try_dir / f"{host}.log").read_text(), logs
    # two "hosts" on one machine, each with its own host_name, as the page asks
    hosts = {row["built_by"]["host"] for row in json.loads((try_dir / "built_by.json").read_text())}
    assert hosts and hosts <= {"host1", "host2"}, hosts
    assert "Traceback" not in logs
    assert "13 ok" in (try_dir / "pasted.log").read_text(), logs  # the trial's 10 and the 3 built by the paste
    assert not (try_dir / "s3" / "local-s3.json").exists()  # the stop block stopped the server
