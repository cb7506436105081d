"""Which stores' or hotels' rows (keys) a partition's rebuild may change, from its changed raw files or its
upstream's: a partition that reads one key's slice is up to date when its key's rows cannot change."""

from __future__ import annotations

from tasks.freshness.dataversions import key_versions
from tasks.freshness.engine import Engine
from tasks.freshness.inputs import changed_paths, parse_inputs
from tasks.storage.rawzone import RawFileChanged


def changed_keys(task, engine: Engine) -> frozenset[str] | None:
    """The keys (stores, hotels) whose rows a rebuild of ``task`` may change: those of its changed raw
    files when each holds one key's rows, or, for one that may rebuild once its upstream is, the keys of
    that upstream's; None: any key's."""
    if engine.state(task).may_rebuild:
        return upstream_keys(task, engine)
    return _own_keys(task, engine)


def fold_upstream(task, engine: Engine, name: str, ups_of, through, fold):
    """``fold(ups, values)`` of ``task``: ``ups_of(node)`` gives a partition's (upstream partition, what is known
    of it) pairs, and the value of each pair ``through`` says the walk goes through is folded first (``values``:
    task id -> value), once per pass (memo ``name``). An explicit stack: a chain is deeper than Python's
    recursion limit."""
    values = engine.once_per_pass((name,), dict)
    stack = [(task, None)]
    while stack:
        node, ups = stack[-1]
        if node.task_id in values:
            stack.pop()
            continue
        if ups is None:  # first visit
            ups = ups_of(node)
            stack[-1] = (node, ups)
        todo = [pair[0] for pair in ups if through(pair) and pair[0].task_id not in values]
        if todo:
            stack.extend((up, None) for up in reversed(todo))
            continue
        values[node.task_id] = fold(ups, values)
        stack.pop()
    return values[task.task_id]


def upstream_keys(task, engine: Engine) -> frozenset[str] | None:
    """The keys whose rows may change once the upstream of ``task`` that is not ok is rebuilt, through every
    partition between that may rebuild too; None: any key's."""

    def ups_of(node) -> list:  # its upstream not ok (built by newer code counts as ok: it is kept)
        return [
            (up, engine.state(up).may_rebuild)
            for up in node.upstream()
            if engine.state(up).state not in ("ok", "newer")
        ]

    def fold(ups, values) -> frozenset[str] | None:
        keys: frozenset[str] | None = frozenset()
        for up, may_rebuild in ups:
            theirs = values[up.task_id] if may_rebuild else _own_keys(up, engine)
            keys = None if keys is None or theirs is None else keys | theirs
        return keys

    return fold_upstream(task, engine, "keys upstream", ups_of, lambda pair: pair[1], fold)


def not_its_keys(task, engine: Engine) -> bool:
    """Whether ``task`` reads one key's slice of an upstream that may rebuild, and that rebuild can change
    other keys' rows only: then it is up to date whatever the upstream's rebuild gives."""
    if not task.reads_a_slice or not engine.state(task).may_rebuild:
        return False
    keys = upstream_keys(task, engine)
    return keys is not None and getattr(task, type(task).entry.key_param) not in keys


def _own_keys(task, engine: Engine) -> frozenset[str] | None:
    """:func:`changed_keys` of a partition stale by itself: by its raw files, or by an upstream rebuilt since
    it read it (not by its rules, nor its folder)."""
    state = engine.state(task)
    if state.state != "stale" or state.may_rebuild:
        return None
    store = engine.store(task)
    manifest = engine.manifest(store, task.key)
    if (
        not manifest
        or manifest.get("_corrupt")
        or (manifest.get("verify_mismatch") and not manifest.get("verify_changed_raw"))
        or manifest.get("rules_fingerprint") != task.rules_fingerprint()
        or engine.folder_problem(store, task.key, manifest)
    ):
        return None
    if not task.reads_raw():
        return _read_keys(task, manifest, engine)
    window = engine.window(task)
    if window is None:
        return None
    zone, hashes = engine.zone(task), manifest.get("input_hashes") or {}
    now, sizes = {f.relpath: f for f in window.read}, parse_inputs(manifest.get("inputs", []))

    def _same_bytes(path: str) -> bool:  # touched, or re-sent with the bytes the build read: no key's rows change
        if path not in hashes or path not in now or sizes.get(path, (None,))[0] != now[path].size:
            return False  # new, gone or of another size: no need to read it
        try:
            return engine.digest(zone, now[path]) == hashes[path]
        except RawFileChanged:
            return False

    paths = {p for p in changed_paths(manifest, window.read, zone.mtime_resolution_ns) if not _same_bytes(p)}
    keys = {task.input_slice(p) for p in [*paths, *(manifest.get("verify_changed_raw") or [])]}
    return None if not keys or None in keys else frozenset(keys)


def _read_keys(task, manifest: dict, engine: Engine) -> frozenset[str] | None:
    """The keys whose rows changed in the upstream partitions rebuilt since ``task`` read them: those whose
    version there differs from the one its manifest recorded; None: unknown (one recorded none)."""
    recorded, versions = manifest.get("upstream") or {}, manifest.get("upstream_keys") or {}
    keys: set[str] = set()
    for up in task.upstream():
        now = engine.manifest(engine.store(up), up.key)
        if up.task_id not in recorded:  # built without it: any key's rows may change
            return None
        if recorded[up.task_id] == task.upstream_version(now):
            continue  # read as it is
        was, new = versions.get(up.task_id), key_versions(now)
        if was is None or new is None:
            return None
        keys |= {key for key in was.keys() | new.keys() if was.get(key) != new.get(key)}
    return frozenset(keys) or None


def up_to_date(task, engine: Engine) -> bool:
    """Whether a run leaves ``task`` as it is: ok, or its upstream's rebuild can change other keys' rows only
    (status says ok; its upstream's build failing does not hold it back)."""
    return engine.state(task).ok or not_its_keys(task, engine)
