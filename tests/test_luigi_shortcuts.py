"""Each shortcut of tasks/luigi_shortcuts/ gives Luigi's own answer (a Luigi upgrade that changes
what they rely on fails here). Luigi's own path is called directly: ``Register.__call__`` and
``luigi.Task``'s ``get_params``/``get_param_values``, on every task family of the catalogue."""

from __future__ import annotations

import datetime as dt
import logging
import threading

import luigi
import pytest
from luigi.task_register import Register
from luigi.tools.range import RangeDaily

import tasks
from tasks import catalogue, settings
from tasks.luigi_shortcuts import CachedInstances, SnapshotSections, default_of, snapshot

pytestmark = pytest.mark.luigi

DATE = dt.date(2026, 9, 15)


def _kwargs(cls) -> dict:
    """A valid value for every parameter of a partition task."""
    values = {"date": DATE, "hotel": "H1", "store_id": "S001"}
    return {name: values[name] for name, _ in luigi.Task.get_params.__func__(cls)}


def _families() -> list[type]:
    tasks.register()
    found = []
    for spec in catalogue.DATASETS:
        cls = Register.get_task_cls(spec.task.get_task_family())
        if isinstance(cls, CachedInstances):
            found.append(cls)
    return found


@pytest.fixture
def fresh_luigi(lab):
    """The lab clears Luigi's instance cache, as a new process would have it."""
    return lab


@pytest.mark.parametrize("dataset", catalogue.names())
def test_params_and_values_are_luigis_own(fresh_luigi, dataset):
    tasks.register()
    cls = Register.get_task_cls(catalogue.BY_NAME[dataset].task.get_task_family())
    kwargs = _kwargs(cls)
    ours = cls.get_params()
    assert [name for name, _ in ours] == [name for name, _ in luigi.Task.get_params.__func__(cls)]
    assert cls.get_param_values(ours, [], kwargs) == luigi.Task.get_param_values.__func__(cls, ours, [], kwargs)


@pytest.mark.parametrize("dataset", catalogue.names())
def test_an_instance_is_the_one_luigi_makes_and_caches(fresh_luigi, dataset):
    tasks.register()
    cls = Register.get_task_cls(catalogue.BY_NAME[dataset].task.get_task_family())
    kwargs = _kwargs(cls)
    ours = cls(**kwargs)
    theirs = Register.__call__(cls, **kwargs)  # Luigi's path: its cache, filled by the first call
    assert ours is theirs
    assert ours.task_id == theirs.task_id and ours.param_kwargs == theirs.param_kwargs
    assert cls(**kwargs) is ours


def test_clearing_luigis_cache_clears_the_shortcut(fresh_luigi):
    cls = _families()[0]
    kwargs = _kwargs(cls)
    before = cls(**kwargs)
    Register.clear_instance_cache()
    after = cls(**kwargs)
    assert after is not before and after.task_id == before.task_id
    assert Register.__call__(cls, **kwargs) is after


def test_a_disabled_luigi_cache_makes_new_instances(fresh_luigi, monkeypatch):
    cls = _families()[0]
    kwargs = _kwargs(cls)
    monkeypatch.setattr(Register, "_Register__instance_cache", None)  # what Register.disable_instance_cache does
    assert cls(**kwargs) is not cls(**kwargs)


def test_a_section_in_a_snapshot_is_read_once_with_luigis_values(fresh_luigi):
    cfg = luigi.configuration.get_config()
    assert isinstance(settings.qsr, SnapshotSections)
    with snapshot():
        first = settings.qsr()
        assert settings.qsr() is first
        theirs = Register.__call__(settings.qsr)
        assert first.param_kwargs == theirs.param_kwargs
        cfg.set("qsr", "suspicious_qty_threshold", "17")
        assert settings.qsr().suspicious_qty_threshold == first.suspicious_qty_threshold  # a snapshot
    assert settings.qsr().suspicious_qty_threshold == 17  # seen once the block ends


def test_a_section_read_on_another_thread_as_the_snapshot_ends_is_read(fresh_luigi):
    """A release thread reads a section while the build's snapshot ends: before, it stored the section in a
    snapshot that was gone meanwhile ('NoneType' object does not support item assignment)."""
    import threading

    reading, ended = threading.Event(), threading.Event()

    class slow(luigi.Config, metaclass=SnapshotSections):  # noqa: N801 - a section's name
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            reading.set()
            assert ended.wait(10)

    got: list = []
    with snapshot():
        thread = threading.Thread(target=lambda: got.append(slow()))
        thread.start()
        assert reading.wait(10)
    ended.set()
    thread.join(10)
    assert len(got) == 1 and isinstance(got[0], slow)


def test_a_settings_default_is_what_luigi_gives_when_no_config_file_sets_it(fresh_luigi):
    cfg = luigi.configuration.get_config()
    for name, section in settings.SECTIONS.items():
        for key, param in section.get_params():
            saved = cfg.get(name, key) if cfg.has_option(name, key) else None
            if saved is not None:  # the repository's luigi.cfg sets it
                cfg.remove_option(name, key)
            try:
                assert getattr(section(), key) == default_of(param), (name, key)
            finally:
                if saved is not None:
                    cfg.set(name, key, saved)


def test_luigis_command_line_takes_a_tasks_options_only_in_full(fresh_luigi):
    """``--hotel`` is a prefix of every ``--hotels-...`` setting flag: with argparse's abbreviations on,
    Luigi's own parser stopped with "ambiguous option". An abbreviation is refused, not guessed."""
    from luigi.cmdline_parser import CmdlineParser

    tasks.register()
    with CmdlineParser.global_instance(["HotelOtbExport", "--hotel", "H2"]) as parser:
        assert parser.get_task_obj().hotel == "H2"
    with pytest.raises(SystemExit), CmdlineParser.global_instance(["HotelOtbExport", "--hot", "H2"]) as parser:
        parser.get_task_obj()


def test_the_shortcut_follows_every_way_luigi_clears_its_cache(fresh_luigi):
    """Two clears in a row (a freed dict's address may be reused), and a clear called on a task class
    (Luigi then stores the new cache on the metaclass): after each, the instance is Luigi's new one."""
    cls = _families()[0]
    kwargs = _kwargs(cls)
    first = cls(**kwargs)
    Register.clear_instance_cache()
    Register.clear_instance_cache()
    second = cls(**kwargs)
    assert second is not first and Register.__call__(cls, **kwargs) is second
    cls.clear_instance_cache()
    try:
        third = cls(**kwargs)
        assert third is not second and Register.__call__(cls, **kwargs) is third
    finally:  # Luigi's cache back on Register, where the next test's lab clears it
        del CachedInstances._Register__instance_cache


def test_a_parameter_left_to_the_config_is_read_again_when_the_config_changes(fresh_luigi, setting):
    """Luigi resolves a parameter that is not given from the config at every call, so the instance
    follows a config changed in the same process; the shortcut takes only calls that give every
    parameter, and so gives the same answers."""
    tasks.register()
    cls = Register.get_task_cls("HotelPickup")
    setting("HotelPickup", "hotel", "H1")
    first = cls(date=DATE)
    setting("HotelPickup", "hotel", "H2")
    second = cls(date=DATE)
    assert (first.hotel, second.hotel) == ("H1", "H2")
    assert second is Register.__call__(cls, date=DATE) and second is cls(date=DATE, hotel="H2")


# --- the local scheduler: Luigi's answers, step by step ---------------------------------------------


def _luigis_local_scheduler(**config):
    """What ``luigi.interface._WorkerSchedulerFactory.create_local_scheduler`` makes without Daybreak."""
    from luigi.scheduler import Scheduler

    return Scheduler(prune_on_get_work=True, record_task_history=False, **config)


def _drive(
    sched,
    graph: dict,
    fails: set,
    workers: dict[str, set],
    done: set,
    resources: dict,
    external: set,
    priorities: dict | None = None,
    dynamic: dict | None = None,
    tick=lambda: None,
) -> list:
    """Add ``graph`` (task -> deps) for each worker (the tasks of its set only; those in ``external``
    not runnable), then ask for work until no worker gets any, marking each task handed out DONE, or
    FAILED when in ``fails``. A task in ``dynamic``, the first time it is handed out, yields new
    dependencies as a Luigi worker reports them (the new tasks added, the task PENDING again with
    ``new_deps``). ``tick`` is called after each add and each request (a test's clock). Every reply and
    count, in order."""
    from luigi.scheduler import DONE, FAILED, PENDING

    priorities, dynamic = priorities or {}, dict(dynamic or {})

    def add(worker, task_id, **kwargs):
        sched.add_task(worker=worker, task_id=task_id, family=task_id.rstrip("0123456789"), params={}, **kwargs)
        tick()

    for worker, its_tasks in workers.items():
        sched.add_worker(worker, [("workers", 1)])
        for task_id, deps in graph.items():
            if task_id not in its_tasks:
                continue
            add(
                worker,
                task_id,
                status=DONE if task_id in done else PENDING,
                deps=deps,
                runnable=task_id not in external,
                resources=resources.get(task_id),
                priority=priorities.get(task_id, 0),
            )
    log = []
    idle = 0
    while idle < len(workers):
        idle = 0
        for worker in workers:
            reply = sched.get_work(worker=worker, host="h", current_tasks=[])
            tick()
            log.append((worker, reply, sched.count_pending(worker)))
            task_id = reply["task_id"]
            if task_id is None:
                idle += 1
            elif task_id in dynamic:
                new = dynamic.pop(task_id)
                for dep in new:
                    add(worker, dep, status=PENDING, deps=[], runnable=True, priority=priorities.get(dep, 0))
                add(worker, task_id, status=PENDING, new_deps=new, runnable=True)
            else:
                add(worker, task_id, status=FAILED if task_id in fails else DONE, expl="x")
    return log


def _random_graph(rng, n: int) -> dict:
    graph = {}
    for i in range(n):
        family = rng.choice(["stg", "state", "pickup"])
        graph[f"{family}{i}"] = rng.sample(list(graph), k=min(len(graph), rng.randint(0, 3)))
    return graph


@pytest.mark.parametrize("seed", range(12))
def test_the_local_scheduler_answers_as_luigis_own(seed):
    """Random graphs, with tasks done before the run, tasks that fail (and are disabled after one failure
    in half the cases, so the upstream walk matters), tasks no worker can run, a resource and one or two
    workers (the second with some of the tasks): every reply to
    ``get_work`` and every ``count_pending`` equals the one Luigi's own local scheduler gives."""
    import random

    from tasks.luigi_shortcuts import LocalScheduler

    rng = random.Random(seed)
    graph = _random_graph(rng, rng.randint(5, 60))
    names = list(graph)
    done = set(rng.sample(names, k=len(names) // 4))
    fails = set(rng.sample(names, k=len(names) // 6))
    workers = {"w1": set(names)}
    if seed % 2:  # a second worker with some of the tasks: tasks with one worker, tasks with two
        workers["w2"] = set(rng.sample(names, k=len(names) * 2 // 3))
    external = set(rng.sample(names, k=len(names) // 8))  # not runnable: in no worker's tasks
    resources = {name: {"sftp": 1} for name in rng.sample(names, k=len(names) // 5)}
    config = {"retry_count": 1} if seed % 4 < 2 else {}
    args = (graph, fails, workers, done, resources, external)
    theirs = _drive(_luigis_local_scheduler(resources={"sftp": 1}, **config), *args)
    ours = _drive(LocalScheduler(resources={"sftp": 1}, **config), *args)
    assert ours == theirs
    assert any(reply["task_id"] for _, reply, _ in ours)


@pytest.mark.parametrize("seed", range(16))
def test_a_one_worker_run_is_answered_from_the_ready_heap_as_luigi_would(seed, monkeypatch):
    """The case of a local run (one worker, no resources): ``get_work`` takes its answer from the ready
    heap, not from Luigi's sort and scan, and every reply and count still equals Luigi's. Random graphs
    with done, failing, unrunnable tasks, raised priorities (which Luigi passes to dependencies), tasks
    that yield dynamic dependencies, retries disabled after one failure in half the cases; a test clock
    gives many tasks the same rank in a third of the cases (then Luigi's order decides, so the heap
    defers to Luigi's own ``get_work``); otherwise the heap answers every request."""
    import random
    from types import SimpleNamespace

    from luigi import scheduler

    from tasks.luigi_shortcuts import LocalScheduler

    rng = random.Random(100 + seed)
    graph = _random_graph(rng, rng.randint(5, 80))
    names = list(graph)
    done = set(rng.sample(names, k=len(names) // 4))
    fails = set(rng.sample(names, k=len(names) // 6))
    external = set(rng.sample(names, k=len(names) // 8))
    priorities = {name: rng.choice([1, 5, 10]) for name in rng.sample(names, k=len(names) // 3)} if seed % 2 else {}
    yielding = rng.sample(names, k=len(names) // 6)
    dynamic = {name: [f"dyn{i}x{j}" for j in range(rng.randint(1, 2))] for i, name in enumerate(yielding)}
    ties = seed % 3 == 0
    config = {"retry_count": 1} if seed % 4 < 2 else {}
    args = (graph, fails, {"w1": set(names)}, done, {}, external, priorities, dynamic)

    luigis_get_work, fallbacks = scheduler.Scheduler.get_work, []

    def counted(self, *a, **kw):
        fallbacks.extend([1] if isinstance(self, LocalScheduler) else [])
        return luigis_get_work(self, *a, **kw)

    monkeypatch.setattr(scheduler.Scheduler, "get_work", counted)
    logs = []
    for make in (_luigis_local_scheduler, LocalScheduler):
        steps = [0]  # Luigi's clock moves only when the test says, the same for both schedulers

        def tick(steps=steps):
            steps[0] += 1

        def clock(steps=steps):
            return 1000.0 + (steps[0] // 3 if ties else steps[0] / 1000)

        monkeypatch.setattr(scheduler, "time", SimpleNamespace(time=clock))
        logs.append(_drive(make(**config), *args, tick=tick))
    assert logs[1] == logs[0]
    assert any(reply["task_id"] for _, reply, _ in logs[1])
    if not ties:
        assert fallbacks == []
    else:
        assert len(fallbacks) < len(logs[1])


def test_a_forgiven_failure_is_handed_out_again_as_by_luigi():
    """A task made PENDING by a status change alone (``forgive_failures``, as the visualiser's button)
    goes back on the ready heap: both schedulers hand it out again, and its dependent after it."""
    from luigi.scheduler import DONE, FAILED, PENDING

    from tasks.luigi_shortcuts import LocalScheduler

    logs = []
    for sched in (_luigis_local_scheduler(), LocalScheduler()):
        sched.add_task(worker="w", task_id="a", status=PENDING, runnable=True)
        sched.add_task(worker="w", task_id="b", status=PENDING, deps=["a"], runnable=True)
        log = [sched.get_work(worker="w", current_tasks=[])]
        sched.add_task(worker="w", task_id="a", status=FAILED, expl="x")
        log.append(sched.get_work(worker="w", current_tasks=[]))
        sched.forgive_failures(task_id="a")
        log.append(sched.get_work(worker="w", current_tasks=[]))
        sched.add_task(worker="w", task_id="a", status=DONE)
        log.append(sched.get_work(worker="w", current_tasks=[]))
        logs.append(log)
    assert logs[1] == logs[0]
    assert [reply["task_id"] for reply in logs[1]] == ["a", None, "a", "b"]


def test_the_counts_follow_a_worker_that_is_pruned(monkeypatch):
    """A worker silent for longer than ``worker_disconnect_delay`` is pruned and leaves the tasks it
    shared with the worker still running: the one worker left is counted from the kept counts, and
    they equal Luigi's walk over the pending tasks."""
    from types import SimpleNamespace

    from luigi import scheduler
    from luigi.scheduler import DONE, PENDING

    from tasks.luigi_shortcuts import LocalScheduler

    logs = []
    for make in (_luigis_local_scheduler, LocalScheduler):
        now = [1000.0]
        monkeypatch.setattr(scheduler, "time", SimpleNamespace(time=lambda now=now: now[0]))
        sched = make()
        for task_id in ("a", "b", "c"):
            sched.add_task(worker="gone", task_id=task_id, status=PENDING, runnable=True)
        now[0] += 61  # past the 60 s worker_disconnect_delay of "gone", which says nothing more
        sched.add_task(worker="w", task_id="b", status=PENDING, runnable=True)
        sched.add_task(worker="w", task_id="d", status=PENDING, deps=["b"], runnable=True)
        log = []
        while True:
            reply = sched.get_work(worker="w", current_tasks=[])
            log.append((reply, sched.count_pending("w")))
            if reply["task_id"] is None:
                break
            sched.add_task(worker="w", task_id=reply["task_id"], status=DONE)
        assert [w["name"] for w in sched.worker_list()] == ["w"]  # the silent one pruned
        logs.append(log)
    assert logs[1] == logs[0]
    assert [reply["task_id"] for reply, _ in logs[1]] == ["b", "d", None]
    assert logs[1][0][0]["n_pending_tasks"] == 2  # b and d, before b is handed out


def test_the_local_scheduler_walks_upstream_of_a_disabled_task():
    """A task waiting on a disabled one is not counted as pending, as in Luigi (the shortcut that skips
    the walk applies only while no task is disabled)."""
    from luigi.scheduler import DISABLED, PENDING

    from tasks.luigi_shortcuts import LocalScheduler

    counts = []
    for sched in (_luigis_local_scheduler(), LocalScheduler()):
        sched.add_task(worker="w", task_id="a", status=DISABLED, runnable=True)
        sched.add_task(worker="w", task_id="b", status=PENDING, deps=["a"], runnable=True)
        sched.add_task(worker="w", task_id="c", status=PENDING, runnable=True)
        counts.append(sched.count_pending("w"))
    assert counts[0] == counts[1]
    assert counts[1]["n_pending_tasks"] == 1


def test_the_local_scheduler_prunes_once_a_second(monkeypatch):
    """A task a dead worker was running is failed by the prune, on the first request, then after a
    second: a worker that needs it stops waiting for it (``get_work``'s ``running_tasks``, what a Luigi
    worker waits on) no later than a second after its runner died."""
    from luigi.scheduler import FAILED, PENDING, RUNNING

    from tasks import luigi_shortcuts
    from tasks.luigi_shortcuts import LocalScheduler

    clock = [1000.0]
    monkeypatch.setattr(luigi_shortcuts.local_scheduler.time, "monotonic", lambda: clock[0])
    sched = LocalScheduler(worker_disconnect_delay=0)
    sched.add_task(worker="gone", task_id="t", status=RUNNING, runnable=True)
    sched.add_task(worker="w", task_id="t", status=PENDING, runnable=True)
    assert sched.get_work(worker="w")["running_tasks"] == []  # first request: pruned, "gone" silent for > 0 s
    sched.add_task(worker="gone2", task_id="u", status=RUNNING, runnable=True)
    sched.add_task(worker="w", task_id="u", status=PENDING, runnable=True)
    waiting = sched.get_work(worker="w")["running_tasks"]
    assert waiting == [{"task_id": "u", "worker": "gone2"}]  # within the second: no prune
    clock[0] += 1.0
    assert sched.get_work(worker="w")["running_tasks"] == []
    assert set(sched.task_list(FAILED, "")) == {"t", "u"}


def test_a_retry_is_handed_out_as_soon_as_it_is_due_as_by_luigi(monkeypatch):
    """A task that failed is handed out again on the first request after ``retry_delay`` has run out, as
    Luigi's scheduler (which prunes on every request) does, even within a second of the last prune:
    a task that fails fast is retried within the run, not after it ended."""
    from luigi.scheduler import FAILED, PENDING, RUNNING

    from tasks import luigi_shortcuts
    from tasks.luigi_shortcuts import LocalScheduler

    wall, mono = [5000.0], [1000.0]
    monkeypatch.setattr(luigi_shortcuts.local_scheduler.time, "monotonic", lambda: mono[0])
    monkeypatch.setattr("luigi.scheduler.time.time", lambda: wall[0])
    config = {"retry_delay": 0.2}
    handed: dict[str, list] = {"luigi": [], "ours": []}
    for name, sched in (("luigi", _luigis_local_scheduler(**config)), ("ours", LocalScheduler(**config))):
        sched.add_task(worker="w", task_id="t", status=PENDING, runnable=True)
        assert sched.get_work(worker="w")["task_id"] == "t"
        sched.add_task(worker="w", task_id="t", status=FAILED, runnable=True)  # it failed at once
        for step in (0.1, 0.05, 0.2):  # 0.1 s, 0.15 s, 0.35 s after the failure: within one second
            wall[0] += step
            mono[0] += step
            handed[name].append(sched.get_work(worker="w")["task_id"])
        assert list(sched.task_list(RUNNING, "")) == ["t"]
        wall[0], mono[0] = 5000.0, 1000.0
    expected = [None, None, "t"]
    assert handed == {"luigi": expected, "ours": expected}


def test_a_luigi_run_in_a_daybreak_process_uses_the_local_scheduler(lab):
    """The ``luigi`` command and ``luigi.build`` make their scheduler through Luigi's factory, which
    Daybreak's registration points at :class:`LocalScheduler`; a run through it succeeds."""
    from luigi import interface

    from tasks.luigi_shortcuts import LocalScheduler

    tasks.register()
    assert isinstance(interface._WorkerSchedulerFactory().create_local_scheduler(), LocalScheduler)
    order = []

    class Step(luigi.Task):
        n = luigi.IntParameter()

        def requires(self):
            return [Step(n=self.n - 1)] if self.n else []

        def complete(self):
            return self.n in order

        def run(self):
            order.append(self.n)

    assert _build_keeping_logging([Step(n=30)])
    assert order == list(range(31))


def _build_keeping_logging(to_build: list, **kwargs) -> bool:
    """``luigi.build`` with the local scheduler, then Luigi's interface logging put back as it was:
    Luigi sets up its logging once per process, and later tests of this process keep Daybreak's."""
    from luigi.setup_logging import InterfaceLogging

    logger = logging.getLogger("luigi-interface")
    level, handlers, configured = logger.level, list(logger.handlers), InterfaceLogging._configured
    try:
        return luigi.build(to_build, local_scheduler=True, log_level="WARNING", **kwargs)
    finally:
        logger.setLevel(level)
        logger.handlers[:] = handlers
        InterfaceLogging._configured = configured


@pytest.mark.parametrize("workers", [1, 2])
def test_a_local_range_hands_out_its_dates_oldest_first_a_stretch_per_worker_process(lab, workers, monkeypatch):
    """Luigi's scheduler keeps a task's dependencies as a set and ranks them in hash order; Daybreak's
    ranks them in the order the range lists them, so a ``RangeDaily`` of 40 dates is handed out oldest
    first with one worker process, and with two as two stretches of 20, a date of each in turn (the
    dates that run at once never read the same raw folder)."""
    from tasks.luigi_shortcuts import LocalScheduler

    tasks.register()
    done = lab.root / f"done{workers}"
    done.mkdir()
    handed_out, get_work = [], LocalScheduler.get_work

    def recorded(self, *args, **kwargs):
        reply = get_work(self, *args, **kwargs)
        if reply.get("task_family") == "OrderProbe":
            handed_out.append(dt.date.fromisoformat(reply["task_params"]["date"]))
        return reply

    monkeypatch.setattr(LocalScheduler, "get_work", recorded)

    class OrderProbe(luigi.Task):
        date = luigi.DateParameter()

        def output(self):
            return luigi.LocalTarget(done / str(self.date))

        def run(self):
            (done / str(self.date)).touch()

    start = dt.date.today() - dt.timedelta(days=50)  # within RangeDaily's days_back (100)
    dates = [start + dt.timedelta(days=i) for i in range(40)]
    params = {"of": OrderProbe, "start": start, "stop": dates[-1] + dt.timedelta(days=1)}
    assert _build_keeping_logging([RangeDaily(**params)], workers=workers)
    half = len(dates) // 2
    expected = dates if workers == 1 else [d for pair in zip(dates[:half], dates[half:], strict=True) for d in pair]
    assert handed_out == expected
    assert sorted(p.name for p in done.iterdir()) == [str(d) for d in dates]


def test_a_pruned_worker_that_comes_back_is_counted_afresh(monkeypatch):
    """A worker pruned while it had pending tasks, then back (the same id) as the only worker after the
    other one is pruned in turn: its counts are those of the tasks it added again, as in Luigi."""
    from types import SimpleNamespace

    from luigi import scheduler
    from luigi.scheduler import DONE, PENDING

    from tasks.luigi_shortcuts import LocalScheduler

    logs = []
    for make in (_luigis_local_scheduler, LocalScheduler):
        now = [1000.0]
        monkeypatch.setattr(scheduler, "time", SimpleNamespace(time=lambda now=now: now[0]))
        monkeypatch.setattr(LocalScheduler, "PRUNE_EVERY", 0.0)  # prune on every request, as Luigi's does
        sched = make()
        for task_id in ("a", "b"):
            sched.add_task(worker="w", task_id=task_id, status=PENDING, runnable=True)
        now[0] += 61  # "w" silent past the 60 s worker_disconnect_delay
        sched.add_task(worker="v", task_id="c", status=PENDING, runnable=True)
        log = [sched.get_work(worker="v", current_tasks=[])]  # "w" pruned here
        sched.add_task(worker="v", task_id="c", status=DONE)
        now[0] += 61  # now "v" is silent, and "w" is back
        for task_id in ("a", "b"):
            sched.add_task(worker="w", task_id=task_id, status=PENDING, runnable=True)
        while True:
            reply = sched.get_work(worker="w", current_tasks=[])  # "v" pruned on the first
            log.append(reply)
            if reply["task_id"] is None:
                break
            sched.add_task(worker="w", task_id=reply["task_id"], status=DONE)
        assert [w["name"] for w in sched.worker_list()] == ["w"]  # the silent one pruned
        logs.append(log)
    assert logs[1] == logs[0]
    assert [reply["n_pending_tasks"] for reply in logs[1]] == [1, 2, 1, 0]


def test_a_worker_counting_its_own_tasks_leaves_while_another_holds_the_one_it_needs(lab):
    """``[worker] count_uniques`` asks a worker to leave once no pending task is its own alone; Luigi's
    rule then holds even with Daybreak's many-hosts keep-alive (a worker stays while another runs a task it
    needs), as Luigi's own test of it does: worker X takes A and never runs it, worker Y leaves."""
    from luigi.scheduler import Scheduler
    from luigi.worker import Worker

    tasks.register()
    done: set[str] = set()

    class Needed(luigi.Task):
        def complete(self):
            return "a" in done

        def run(self):
            done.add("a")

    class Wanted(luigi.Task):
        def requires(self):
            return Needed()

        def complete(self):
            return "b" in done

        def run(self):
            done.add("b")

    sched = Scheduler(retry_delay=100, remove_delay=1000, worker_disconnect_delay=10)
    with Worker(scheduler=sched, worker_id="X", keep_alive=True, count_uniques=True) as x:
        with Worker(scheduler=sched, worker_id="Y", keep_alive=True, count_uniques=True, wait_interval=0.1) as y:
            assert x.add(Wanted()) and y.add(Wanted())
            assert sched.get_work(worker="X", current_tasks=[])["task_id"] == Needed().task_id  # X holds A
            finished = threading.Event()
            runner = threading.Thread(target=lambda: (y.run(), finished.set()), daemon=True)
            runner.start()
            assert finished.wait(15), "worker Y stayed for a task only X may run"
    assert done == set()


def test_a_task_this_host_leaves_to_another_stays_pending_and_is_handed_only_to_the_other():
    """A task whose completeness check sets ``declined`` (a partition built under newer code or settings than
    this host's, tasks/base.py) is added by Luigi's worker as external data (``luigi.worker._is_external``):
    luigid keeps it pending, never counts it done, and hands it only to a worker that added it runnable."""
    from luigi.scheduler import PENDING, Scheduler
    from luigi.worker import Worker

    tasks.register()
    leave: list[bool] = []

    class Declined(luigi.Task):
        def complete(self):
            self.declined = "built under newer settings" if leave else ""
            return False

        def run(self):
            pass

    sched = Scheduler(retry_delay=100, remove_delay=1000, worker_disconnect_delay=10)
    with Worker(scheduler=sched, worker_id="new") as new, Worker(scheduler=sched, worker_id="old") as old:
        assert new.add(Declined())
        leave.append(True)
        assert old.add(Declined())  # after the other worker: its status is the one luigid keeps
        assert list(sched.task_list(PENDING, "")) == [Declined().task_id]
        assert sched.get_work(worker="old", current_tasks=[])["task_id"] is None
        assert sched.get_work(worker="new", current_tasks=[])["task_id"] == Declined().task_id


NOT_ANSWERING = "sftp://etl@files:22/pos: server not answering (connection refused) after 4 attempts"


class _Fails(luigi.Task):
    def run(self):
        raise RuntimeError(NOT_ANSWERING)


def test_the_message_of_a_failure_luigid_keeps_is_the_exceptions_own():
    """What another host's summary says of a partition luigid counts failed: Luigi keeps "Runtime error:" and
    the whole traceback; the summary names the exception's message alone."""
    from luigi import scheduler, worker

    from tasks.luigi_shortcuts.hosts import luigid_error_message

    sched = scheduler.Scheduler()
    with worker.Worker(scheduler=sched, no_install_shutdown_handler=True, keep_alive=False) as w:
        w.add(_Fails())
        w.run()
    kept = sched.fetch_error(_Fails().task_id)["error"]
    assert "Traceback" in kept
    assert luigid_error_message(kept) == NOT_ANSWERING
