# SPDX-License-Identifier: MIT
"""mcp-sandboxd kernel: one persistent Python namespace per session.

Started by mcpsd-agent (docs/agent-protocol.md) with descriptors 0 = /dev/null,
1 and 2 = pipes the agent relays as the call's output, 3 = frames from the
agent, 4 = frames to the agent. A frame is a 4-byte big-endian length L, a
type byte and L - 1 payload bytes. From the agent: E (run a file) and C (the
workspace is ready: change to it), both TLV records (tag byte, 4-byte length,
value). To the agent: R once ready (TLV: m = preloaded module, w = warning), X
with each call's result (JSON, id and status first), A after C (TLV: c = the
directory, r = an error).

Code runs like a notebook cell: in the namespace of a module named __main__
that lives as long as this process, compiled with the code file's name (so
tracebacks and inspect point at the user's lines), with top-level await, and
the value of a final expression shown. SIGINT interrupts a running call with
KeyboardInterrupt and is ignored between calls. SystemExit ends the process
after its result was sent: the agent then starts a new kernel.

Only the standard library is imported here; numpy, pandas and matplotlib are
touched only when the user (or the preload list) imported them.
"""

import _thread
import ast
import builtins
import errno
import importlib
import importlib.abc
import io
import json
import linecache
import os
import select
import signal
import sys
import time
import tokenize
import traceback
import types

FROM_AGENT = 3
TO_AGENT = 4
FRAME_IN_MAX = 1 << 20  # longest L the agent sends
FRAME_OUT_MAX = 256 << 10  # longest L the agent accepts
REPR_MAX = 64 << 10  # bytes of each representation of a value
TRACEBACK_MAX = 32 << 10
EVALUE_MAX = 4 << 10
FIGURES_MAX = 50  # figures saved per call
SOURCES_KEPT = 256  # code files kept for tracebacks of older calls
KERNEL_FILE = os.path.abspath(__file__)
CO_COROUTINE = 0x80


class _State:
    running = False  # a call's code is running: SIGINT interrupts it
    ctx = None  # the current call
    home = None  # directory between calls (set by C)
    loop = None  # event loop for top-level await
    sources = []  # code files registered in linecache, oldest first
    packages = os.environ.pop("MCPSD_PYTHON_PACKAGES", None)  # cache dir
    packages_seen = None  # its modification time at the last call
    dropped = 0  # bytes printed between calls since the last X (dropped)
    main_ident = None  # the thread that runs the calls


class _Call:
    def __init__(self, call_id):
        self.id = call_id
        self.cwd = None
        self.figures = []
        self.count = 0
        self.dropped = 0


class _Out:
    """sys.stdout and sys.stderr: what is printed while no call runs (by a
    thread an earlier call left running) is dropped and counted, for the
    next X's "background", so that it never turns up unannounced in the
    next call's output (the agent throws away what reaches the pipes
    between calls, but a write just before a call would be relayed as that
    call's). Everything else is the real stream's."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, s):
        if _State.ctx is None and _thread.get_ident() != _State.main_ident:
            try:
                _State.dropped += len(s.encode("utf-8", "replace")) if isinstance(s, str) else len(s)
            except Exception:
                pass
            return len(s)
        return self._stream.write(s)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _background():
    """Threads other than this one still alive after a call, and the bytes
    threads printed between calls since the last call (reset)."""
    threading = sys.modules.get("threading")
    n = 0
    if threading is not None:
        try:
            me = _thread.get_ident()
            n = sum(1 for t in threading.enumerate() if t.ident != me and t.is_alive())
        except Exception:
            n = 0
    dropped, _State.dropped = _State.dropped, 0
    return {"threads": n, "dropped_bytes": dropped}


# ---- frames -----------------------------------------------------------------


def _read_exact(n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(FROM_AGENT, n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def _recv():
    length = int.from_bytes(_read_exact(4), "big")
    if length == 0 or length > FRAME_IN_MAX:
        raise ValueError("bad frame length %d" % length)
    data = _read_exact(length)
    return data[:1], data[1:]


def _send(kind, payload):
    if len(payload) + 1 > FRAME_OUT_MAX:
        raise ValueError("frame too long")
    data = memoryview((len(payload) + 1).to_bytes(4, "big") + kind + payload)
    while data:
        n = os.write(TO_AGENT, data)
        data = data[n:]


def _tlv(payload):
    """The records of a TLV payload as (tag, value) pairs."""
    out, i, n = [], 0, len(payload)
    while i < n:
        if n - i < 5:
            raise ValueError("truncated record")
        tag = payload[i : i + 1]
        length = int.from_bytes(payload[i + 1 : i + 5], "big")
        i += 5
        if length > n - i:
            raise ValueError("truncated record")
        out.append((tag, payload[i : i + length]))
        i += length
    return out


def _record(tag, value):
    if isinstance(value, str):
        value = value.encode("utf-8", "backslashreplace")
    return tag + len(value).to_bytes(4, "big") + value


# ---- text -------------------------------------------------------------------


def _clean(s):
    """s as text that encodes to UTF-8 (lone surrogates escaped)."""
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


def _cap(s, limit):
    """s cut to at most limit bytes of UTF-8, with a note when cut."""
    b = s.encode("utf-8", "backslashreplace")
    if len(b) <= limit:
        return b.decode("utf-8")
    note = "\n... [truncated: %d bytes in all]" % len(b)
    keep = max(0, limit - len(note))
    return b[:keep].decode("utf-8", "ignore") + note


def _user_tb(tb, filename):
    """The traceback from the first frame of the user's code on."""
    t = tb
    while t is not None and t.tb_frame.f_code.co_filename != filename:
        t = t.tb_next
    return t


def _strip_kernel(te, seen):
    """Drops this file's frames (the SIGINT handler's, say) everywhere."""
    if te is None or id(te) in seen:
        return
    seen.add(id(te))
    if any(f.filename == KERNEL_FILE for f in te.stack):
        te.stack = traceback.StackSummary.from_list(
            [f for f in te.stack if f.filename != KERNEL_FILE]
        )
    _strip_kernel(te.__cause__, seen)
    _strip_kernel(te.__context__, seen)


def _format_exc(e, filename):
    tb = _user_tb(e.__traceback__, filename)
    te = traceback.TracebackException(type(e), e, tb, compact=True)
    _strip_kernel(te, set())
    return "".join(te.format())


def _set_error(result, e, status, filename):
    try:
        text = _format_exc(e, filename)
    except Exception:
        text = "%s: %s\n" % (type(e).__name__, "(traceback unavailable)")
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:
        pass
    try:
        evalue = str(e)
    except Exception:
        evalue = "(str() failed)"
    result["status"] = status
    result["error"] = {
        "ename": _clean(type(e).__name__),
        "evalue": _cap(_clean(evalue), EVALUE_MAX),
        "traceback": _cap(_clean(text), TRACEBACK_MAX),
    }


# ---- values -----------------------------------------------------------------


def _rich(value, data):
    """text/html and text/markdown from pandas or the object's own methods."""
    pd = sys.modules.get("pandas")
    if pd is not None:
        if isinstance(value, pd.DataFrame):
            html = value._repr_html_()
            if isinstance(html, str):
                data["text/html"] = _cap(html, REPR_MAX)
            return
        if isinstance(value, pd.Series):
            html = value.to_frame()._repr_html_()
            if isinstance(html, str):
                data["text/html"] = _cap(html, REPR_MAX)
            return
    if isinstance(value, type):
        return  # a class's _repr_html_ is an unbound function
    for attr, mime in (("_repr_html_", "text/html"), ("_repr_markdown_", "text/markdown")):
        method = getattr(value, attr, None)
        if not callable(method):
            continue
        r = method()
        if isinstance(r, tuple) and r:
            r = r[0]
        if isinstance(r, str):
            data[mime] = _cap(r, REPR_MAX)


def _display(value, filename):
    """The representations of a cell's value, like a notebook's."""
    data = {}
    try:
        data["text/plain"] = _cap(repr(value), REPR_MAX)
    except Exception as e:
        sys.stderr.write("the value could not be shown:\n" + _format_exc(e, filename))
        return None
    try:
        _rich(value, data)
    except Exception as e:
        sys.stderr.write("a rich representation failed:\n" + _format_exc(e, filename))
    return data


# ---- the run viewer's table --------------------------------------------------

FRAME_FILE = os.path.join(".mcp", "value.json")
FRAME_CELLS_MAX = 1000000  # the daemon's lib/tools/view/table.h parses no more


def _save_frame(value, cwd):
    """The last value's data frame (or series) as /data/.mcp/value.json, in
    pandas' "split" layout, for the run viewer (an MCP App): the daemon's
    view_table tool pages and sorts it for the view, never for the model.
    The file of an earlier call is removed first, so it always belongs to
    this call; nothing here may disturb the call, so failures are silent."""
    if cwd is None:
        return
    path = os.path.join(cwd, FRAME_FILE)
    try:
        os.unlink(path)
    except OSError:
        pass
    pd = sys.modules.get("pandas")
    if pd is None or value is None:
        return
    try:
        if isinstance(value, pd.Series):
            value = value.to_frame()
        if not isinstance(value, pd.DataFrame) or value.shape[1] == 0:
            return
        if value.shape[0] * value.shape[1] > FRAME_CELLS_MAX:
            return
        if not isinstance(value.index, pd.RangeIndex):
            value = value.reset_index()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        value.to_json(tmp, orient="split", index=False, date_format="iso",
                      default_handler=str)
        os.replace(tmp, path)
    except Exception:
        pass


# ---- figures ----------------------------------------------------------------


def _save_figures(ctx):
    """Saves every open matplotlib figure as PNG in the call's directory."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None or ctx is None:
        return
    try:
        nums = list(plt.get_fignums())
    except Exception:
        return
    for num in nums:
        try:
            fig = plt.figure(num)
        except Exception:
            continue
        if getattr(fig, "_mcpsd_saved", False):
            pass  # the code saved it itself: no second copy
        elif len(ctx.figures) < FIGURES_MAX:
            ctx.count += 1
            name = "figure-%d-%d.png" % (ctx.id, ctx.count)
            try:
                fig.savefig(os.path.join(ctx.cwd, name), dpi=100, format="png")
                ctx.figures.append(name)
            except Exception as e:
                sys.stderr.write("figure %s could not be saved: %s\n" % (num, e))
        else:
            ctx.dropped += 1
        try:
            plt.close(fig)
        except Exception:
            pass


def _mark_savefig():
    """Figure.savefig marks the figure, so the end of the call does not
    save a copy of a figure the code saved where it wanted it."""
    try:
        import matplotlib.figure as mfig
    except Exception:
        return
    orig = mfig.Figure.savefig
    if getattr(orig, "_mcpsd", False):
        return

    def savefig(self, *args, **kwargs):
        self._mcpsd_saved = True
        return orig(self, *args, **kwargs)

    savefig._mcpsd = True
    mfig.Figure.savefig = savefig


def _show(*args, **kwargs):
    """plt.show(): save the open figures now (there is no screen)."""
    if _State.running:
        _save_figures(_State.ctx)


class _PyplotLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        module.show = _show
        _mark_savefig()

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _PyplotHook(importlib.abc.MetaPathFinder):
    """Patches matplotlib.pyplot.show when (and if) pyplot is imported."""

    def find_spec(self, name, path, target=None):
        if name != "matplotlib.pyplot":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PyplotLoader(spec.loader)
                return spec
        return None


# ---- durable state ------------------------------------------------------------
#
# After every call the kernel saves its namespace (the E frame's s record
# names the directory, inside the conversation's workspace: the state counts
# against its quota and expires with it) with dill, modules by reference,
# each name it cannot serialise left out and named; a new kernel loads the
# newest save before its first call when the E frame asks (L "latest"), or
# the save of an earlier run (L = its number: rewind). Each save is a file
# run-<n>.state written aside and renamed, so a crash never leaves half of
# one; the newest K (the E frame's K) are kept. The file is code-bearing
# data written by the conversation's own code: only this kernel, in the
# conversation's own box, ever reads it (the daemon never parses it).
#
# Layout of a state file: STATE_MAGIC, the dill pickle of {name: value},
# the metadata as JSON, and the JSON's length as 8 bytes big-endian.

STATE_MAGIC = b"MCPSD-STATE 1\n"
STATE_SKIP = frozenset(("__builtins__", "__name__", "__doc__", "__package__",
                        "__loader__", "__spec__", "__annotations__",
                        "__cached__", "__file__"))
STATE_REPORT_NAMES = 50  # names listed in a report; the rest are counted
STATE_NAME_MAX = 120  # characters of a name in a report
STATE_IDLE_S = 0.1  # a save waits for this long without a new frame


class _StateTooBig(Exception):
    pass


class _SaveGivenUp(Exception):
    """A frame came while a save was being written: the call runs first."""


class _Durable:
    dir = None  # the state directory (E's s), None: saving is off
    cap = 0  # most bytes a save may take (E's z)
    keep = 1  # saves kept (E's K)
    seq = None  # the newest run number saved or restored; None: not looked
    report = None  # the last save's report, for the next X
    pending = False  # the last call's state is not saved yet
    kept = None  # the runs saved in dir (None: look again)
    restore = None  # a restore's report, for this call's X


class _CappedWriter:
    """A file the pickle streams into, that refuses to pass the cap and
    gives up when a frame from the agent is waiting: pickling a large
    namespace at half a CPU takes seconds, and the next call must not wait
    for it. The pickler writes at least every 64 KiB frame, so a call waits
    for one frame's pickling at most."""

    def __init__(self, f, cap):
        self.f, self.cap, self.n = f, cap, 0

    def write(self, b):
        self.n += len(b)
        if self.cap and self.n > self.cap:
            raise _StateTooBig(self.n)
        if _agent_waiting(0):
            raise _SaveGivenUp()
        if self.f is not None:
            self.f.write(b)
        return len(b)


def _agent_waiting(timeout):
    """Whether a frame from the agent comes within timeout seconds (the
    frame reader is unbuffered, so select sees every byte not yet read)."""
    try:
        return bool(select.select([FROM_AGENT], [], [], timeout)[0])
    except (OSError, ValueError):
        return False


def _state_runs(d):
    """The run numbers saved in d, newest last."""
    runs = []
    try:
        names = os.listdir(d)
    except OSError:
        return runs
    for name in names:
        if name.startswith("run-") and name.endswith(".state"):
            try:
                runs.append(int(name[4:-6]))
            except ValueError:
                pass
    runs.sort()
    return runs


def _state_path(d, run):
    return os.path.join(d, "run-%d.state" % run)


def _never_saved(value):
    """The words for a value that is never saved even when dill could
    pickle it (dill 0.4 pickles a Thread, whose copy then failed to load
    with a RecursionError on Python 3.13; a copy of an open file, socket or
    thread would not be the live thing anyway), or None."""
    threading = sys.modules.get("threading")
    socket = sys.modules.get("socket")
    kinds = [(io.IOBase, "an open file"), (types.GeneratorType, "a generator"),
             (types.CoroutineType, "a coroutine"),
             (types.AsyncGeneratorType, "an async generator"),
             (types.FrameType, "a frame")]
    if socket is not None:
        kinds.append((socket.socket, "a socket"))
    if threading is not None:
        kinds.append((threading.Thread, "a thread"))
    for cls, words in kinds:
        try:
            if isinstance(value, cls):
                return words
        except Exception:
            pass
    return None


def _why_unsaved(value, e):
    """Why a value cannot be saved, in words."""
    threading = sys.modules.get("threading")
    socket = sys.modules.get("socket")
    kinds = [
        (io.IOBase, "an open file"),
        (types.GeneratorType, "a generator"),
        (types.CoroutineType, "a coroutine"),
        (types.AsyncGeneratorType, "an async generator"),
        (types.FrameType, "a frame"),
    ]
    if socket is not None:
        kinds.insert(0, (socket.socket, "a socket"))
    if threading is not None:
        kinds.insert(0, (threading.Thread, "a thread"))
    for cls, words in kinds:
        try:
            if isinstance(value, cls):
                return words
        except Exception:
            pass
    if type(value).__name__ in ("lock", "RLock", "_thread.lock"):
        return "a lock"
    msg = "%s: %s" % (type(e).__name__, e)
    return "a %s that cannot be serialised (%s)" % (
        _cap(_clean(type(value).__name__), 80), _cap(_clean(msg), 200))


def _note(items, name, why):
    if len(items) < STATE_REPORT_NAMES:
        items.append({"name": _cap(_clean(name), STATE_NAME_MAX), "why": why})


def _save(dill, d, run):
    """Saves the namespace as run's state in d; returns the report."""
    ns = sys.modules["__main__"].__dict__
    imports, data, unsaved, more = {}, {}, [], 0
    for name, value in list(ns.items()):
        if name in STATE_SKIP:
            continue
        if isinstance(value, types.ModuleType):
            imports[name] = value.__name__
            continue
        never = _never_saved(value)
        if never is None:
            data[name] = value
        elif len(unsaved) < STATE_REPORT_NAMES:
            _note(unsaved, name, never)
        else:
            more += 1
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, ".run-%d.tmp-%d" % (run, os.getpid()))
    try:
        with open(tmp, "wb") as f:
            f.write(STATE_MAGIC)
            w = _CappedWriter(f, _Durable.cap)
            try:
                dill.dump(data, w, protocol=4, byref=False, recurse=False)
            except (_StateTooBig, _SaveGivenUp):
                raise
            except Exception:
                # Which names cannot be saved: each alone, then the rest.
                for name in list(data):
                    try:
                        dill.dump(data[name], _CappedWriter(None, 0),
                                  protocol=4, byref=False, recurse=False)
                    except _SaveGivenUp:
                        raise
                    except Exception as e:
                        if len(unsaved) < STATE_REPORT_NAMES:
                            _note(unsaved, name, _why_unsaved(data[name], e))
                        else:
                            more += 1
                        del data[name]
                f.seek(len(STATE_MAGIC))
                f.truncate()
                w = _CappedWriter(f, _Durable.cap)
                dill.dump(data, w, protocol=4, byref=False, recurse=False)
            meta = json.dumps({
                "v": 1, "run": run, "saved_at": time.time(),
                "python": sys.version.split()[0], "imports": imports,
                "unsaved": unsaved, "unsaved_more": more,
            }).encode("utf-8")
            f.write(meta)
            f.write(len(meta).to_bytes(8, "big"))
            size = f.tell()
        os.rename(tmp, _state_path(d, run))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return {"run": run, "bytes": size, "names": len(data),
            "imports": len(imports), "not_saved": unsaved,
            "not_saved_more": more}


def _no_dill(e, what):
    """Why dill cannot be used, in words."""
    if isinstance(e, ModuleNotFoundError) and e.name == "dill":
        return ("this runner image has no dill (python3-dill): the Python "
                "state cannot be %s; rebuild the runner image "
                "(runners/python)" % what)
    return _cap(_clean("dill could not be imported (%s: %s): the Python "
                       "state cannot be %s" % (type(e).__name__, e, what)), 400)


def _autosave():
    """Saves the state of the call that just ended (after its X)."""
    d = _Durable.dir
    if not d:
        return
    t0 = time.monotonic()
    if _Durable.seq is None:
        runs = _state_runs(d)
        _Durable.seq = runs[-1] if runs else 0
    run = _Durable.seq + 1
    report = {"run": run, "ok": False, "bytes": None, "ms": 0,
              "not_saved": [], "error": None}
    try:
        import dill
    except ImportError as e:
        report["error"] = _no_dill(e, "saved")
        dill = None
    if dill is not None:
        try:
            try:
                report.update(_save(dill, d, run))
            except OSError as e:
                # The workspace is full: the older saves make room for
                # this one (the newest stays), then one more try.
                if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                runs = _state_runs(d)
                if len(runs) < 2:
                    raise
                for old in runs[:-1]:
                    try:
                        os.unlink(_state_path(d, old))
                    except OSError:
                        pass
                report["dropped_older"] = runs[:-1]
                report.update(_save(dill, d, run))
            report["ok"] = True
            _Durable.seq = run
        except _SaveGivenUp:
            # A call came: it runs now, and the state after it is saved
            # instead (as when it comes within STATE_IDLE_S).
            _Durable.pending = True
            return
        except _StateTooBig as e:
            report["error"] = ("the state is larger than its cap of %d MB "
                               "(SANDBOX_STATE_MAX_MB, at most half the "
                               "workspace quota): not saved; delete large "
                               "variables (del name) to have it saved "
                               "again" % (_Durable.cap >> 20))
        except OSError as e:
            report["error"] = ("the state could not be written (%s): not "
                               "saved; if the workspace is full, delete "
                               "files" % _clean(os.strerror(e.errno) if e.errno else str(e)))
        except BaseException as e:  # noqa: B036 - a save never fails a call
            report["error"] = _cap(_clean("%s: %s" % (type(e).__name__, e)), 400)
    if report["ok"]:
        runs = _state_runs(d)
        drop = max(0, len(runs) - _Durable.keep)
        for old in runs[:drop]:
            try:
                os.unlink(_state_path(d, old))
            except OSError:
                pass
        _Durable.kept = runs[drop:]
    report["ms"] = int((time.monotonic() - t0) * 1000)
    _Durable.report = report


class _StateError(Exception):
    """A restore or rewind that cannot be done (the call's code is not run)."""


def _read_state(path):
    """The metadata and the pickle's offset of a state file."""
    with open(path, "rb") as f:
        if f.read(len(STATE_MAGIC)) != STATE_MAGIC:
            raise _StateError("not a state file")
        f.seek(-8, os.SEEK_END)
        end = f.tell()
        n = int.from_bytes(f.read(8), "big")
        if n <= 0 or n > end - len(STATE_MAGIC):
            raise _StateError("damaged state file")
        f.seek(end - n)
        meta = json.loads(f.read(n).decode("utf-8"))
    if not isinstance(meta, dict):
        raise _StateError("damaged state file")
    return meta


def _load(path, ns):
    """Loads a state file into ns; returns the report."""
    import dill

    t0 = time.monotonic()
    meta = _read_state(path)
    not_restored = []
    for item in meta.get("unsaved") or []:
        if isinstance(item, dict):
            _note(not_restored, str(item.get("name")),
                  "not saved: %s" % item.get("why"))
    imported = []
    for name, mod in (meta.get("imports") or {}).items():
        try:
            ns[name] = importlib.import_module(mod)
            imported.append(name if name == mod else "%s as %s" % (mod, name))
        except BaseException as e:  # noqa: B036
            _note(not_restored, name, "import %s failed: %s: %s"
                  % (mod, type(e).__name__, _cap(_clean(str(e)), 200)))
    with open(path, "rb") as f:
        f.seek(len(STATE_MAGIC))
        data = dill.load(f)
    if not isinstance(data, dict):
        raise _StateError("damaged state file")
    ns.update(data)
    return {"run": meta.get("run"), "saved_at": meta.get("saved_at"),
            "ms": int((time.monotonic() - t0) * 1000),
            "names": len(data), "imports": imported[:STATE_REPORT_NAMES],
            "not_restored": not_restored,
            "python": meta.get("python")}


def _fresh_namespace(ns):
    for name in list(ns):
        if name != "__builtins__":
            del ns[name]
    ns["__name__"] = "__main__"


def _restore(fields, ns):
    """E's L: "latest" loads the newest save there is (a restore: nothing to
    load is no error), a number the save of that run (a rewind). Raises
    _StateError when a rewind cannot be done."""
    what = fields.get(b"L")
    d = _Durable.dir
    if not what or not d:
        return
    what = what[-1].decode("ascii", "replace")
    runs = _state_runs(d)
    _Durable.kept = runs
    if what == "latest":
        if not runs:
            _Durable.seq = 0
            return
        candidates = list(reversed(runs))
    else:
        try:
            want = int(what)
        except ValueError:
            raise _StateError("rewind takes a run number")
        if want not in runs:
            raise _StateError(
                "there is no saved state of run %d; the saved runs are %s"
                % (want, ", ".join(str(r) for r in runs) or "none"))
        candidates = [want]
    latest = what == "latest"
    try:
        import dill  # noqa: F401
    except ImportError as e:
        msg = _no_dill(e, "loaded")
        if not latest:
            raise _StateError(msg)
        _Durable.restore = {"kind": "restore", "error": msg}
        _Durable.seq = max(runs)
        return
    errors = []
    for run in candidates:
        try:
            _fresh_namespace(ns)
            report = _load(_state_path(d, run), ns)
        except Exception as e:
            errors.append("run %d: %s: %s" % (run, type(e).__name__,
                                              _cap(_clean(str(e)), 200)))
            continue
        report["kind"] = "restore" if latest else "rewind"
        if errors:
            report["skipped"] = errors[:5]
        _Durable.restore = report
        _Durable.seq = max(runs)
        return
    _fresh_namespace(ns)
    _Durable.seq = max(runs)
    msg = "the saved state could not be loaded (%s)" % "; ".join(errors[:3])
    if not latest:
        raise _StateError(msg)
    _Durable.restore = {"kind": "restore", "error": msg}


# ---- running code -------------------------------------------------------------


def _remember_source(filename, src):
    """Keeps the code's lines for tracebacks after the file is gone."""
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(src).readline)[0]
        text = src.decode(encoding, "replace")
    except Exception:
        text = src.decode("utf-8", "replace")
    lines = text.splitlines(True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    linecache.cache[filename] = (len(src), None, lines, filename)
    if filename in _State.sources:
        _State.sources.remove(filename)
    _State.sources.append(filename)
    while len(_State.sources) > SOURCES_KEPT:
        linecache.cache.pop(_State.sources.pop(0), None)


def _loop():
    import asyncio

    if _State.loop is None or _State.loop.is_closed():
        _State.loop = asyncio.new_event_loop()
    asyncio.set_event_loop(_State.loop)
    return _State.loop


def _eval(code, ns):
    r = eval(code, ns)
    if code.co_flags & CO_COROUTINE:
        r = _loop().run_until_complete(r)
    return r


def _run(filename, ns):
    """Runs a file in ns; returns the final expression's value or None."""
    with open(filename, "rb") as f:
        src = f.read()
    _remember_source(filename, src)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(src, filename, "exec", flags | ast.PyCF_ONLY_AST, dont_inherit=True)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    _eval(compile(tree, filename, "exec", flags, dont_inherit=True), ns)
    if last is None:
        return None
    return _eval(compile(last, filename, "eval", flags, dont_inherit=True), ns)


def _exit_code(e):
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    try:
        sys.stderr.write(str(code) + "\n")
    except Exception:
        pass
    return 1


class _Env:
    """The call's environment variables, stdin and directory, undone after."""

    def __init__(self):
        self.saved = {}
        self.stdin = None

    def apply(self, fields, ctx):
        env = os.environb
        for raw in fields.get(b"v", []):
            name, _, value = raw.partition(b"=")
            if name not in self.saved:
                self.saved[name] = env.get(name)
            env[name] = value
        cwd = fields.get(b"c")
        if cwd:
            os.chdir(os.fsdecode(cwd[-1]))
        ctx.cwd = os.getcwd()
        path = fields.get(b"i")
        fd = os.open(os.fsdecode(path[-1]) if path else os.devnull, os.O_RDONLY)
        try:
            os.dup2(fd, 0)
        finally:
            os.close(fd)
        self.stdin = open(0, "r", closefd=False)
        sys.stdin = self.stdin

    def undo(self):
        env = os.environb
        for name, old in self.saved.items():
            try:
                if old is None:
                    env.pop(name, None)
                else:
                    env[name] = old
            except Exception:
                pass
        try:
            fd = os.open(os.devnull, os.O_RDONLY)
            os.dup2(fd, 0)
            os.close(fd)
        except OSError:
            pass
        if self.stdin is not None:
            try:
                self.stdin.close()
            except Exception:
                pass
        sys.stdin = sys.__stdin__
        try:
            os.chdir(_State.home)
        except OSError:
            pass


def _inputs(filename, ns):
    """run_code's inputs, when the call has them, as the variable inputs."""
    path = os.path.join(os.path.dirname(filename), "inputs.json")
    try:
        f = open(path, encoding="utf-8")
    except FileNotFoundError:
        return
    with f:
        ns["inputs"] = json.load(f)


def _call(fields, result, ctx, ns):
    filename = os.fsdecode(fields[b"f"][-1])
    env = _Env()
    try:
        try:
            env.apply(fields, ctx)
            _inputs(filename, ns)
        except (OSError, ValueError) as e:
            _set_error(result, e, "error", filename)
            return
        _State.running = True
        value = None
        try:
            value = _run(filename, ns)
            if value is not None:
                result["value"] = _display(value, filename)
        except SystemExit as e:
            result["status"] = "exit"
            result["exit_code"] = _exit_code(e)
        except KeyboardInterrupt as e:
            _set_error(result, e, "interrupted", filename)
        except BaseException as e:
            _set_error(result, e, "error", filename)
        _save_figures(ctx)
        _save_frame(value, ctx.cwd)
    finally:
        _State.running = False
        result["figures"] = list(ctx.figures)
        if ctx.dropped:
            sys.stderr.write(
                "%d more figures were closed without being saved "
                "(at most %d a call)\n" % (ctx.dropped, FIGURES_MAX)
            )
        env.undo()


def _encode(result):
    """The X payload, made to fit one frame."""
    steps = [
        lambda r: r["value"] and r["value"].pop("text/markdown", None),
        lambda r: r["value"] and r["value"].pop("text/html", None),
        lambda r: r["error"] and r["error"].update(traceback=_cap(r["error"]["traceback"], 8192)),
        lambda r: r["value"] and r["value"].update({"text/plain": _cap(r["value"]["text/plain"], 16384)}),
        lambda r: r.update(figures=r["figures"][:10]),
    ]
    for step in [None] + steps:
        if step is not None:
            step(result)
        b = json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if len(b) + 1 <= FRAME_OUT_MAX:
            return b
    small = {"id": result["id"], "status": result["status"], "value": None,
             "error": None, "figures": [], "exit_code": result.get("exit_code"),
             "background": result.get("background"),
             "state": _state_small(result.get("state"))}
    return json.dumps(small, separators=(",", ":")).encode("utf-8")


def _flush():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass


def _packages():
    """Puts the conversation's package cache (installed by the daemon
    before this call, see lib/run/packages.h) on sys.path ahead of the
    system's packages, and makes imports see what changed in it."""
    if not _State.packages:
        return
    try:
        seen = os.stat(_State.packages).st_mtime_ns
    except OSError:
        seen = None
    if seen == _State.packages_seen:
        return
    _State.packages_seen = seen
    if seen is not None and _State.packages not in sys.path:
        sys.path.insert(1 if sys.path and sys.path[0] == "" else 0,
                        _State.packages)
        # Child Pythons (subprocess, multiprocessing) find them too.
        old = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = _State.packages + (":" + old if old else "")
    importlib.invalidate_caches()


def _state_fields(fields):
    """The E frame's state records: s (directory), z (cap in bytes), K (saves
    kept). Without s nothing is saved or loaded."""
    d = fields.get(b"s")
    new_dir = os.fsdecode(d[-1]) if d else None
    if new_dir != _Durable.dir:
        _Durable.seq = None
        _Durable.kept = None
    _Durable.dir = new_dir
    for tag, attr, lo in ((b"z", "cap", 0), (b"K", "keep", 1)):
        v = fields.get(tag)
        if v:
            try:
                setattr(_Durable, attr, max(lo, int(v[-1])))
            except ValueError:
                pass


def _state_report():
    """X's "state": the last save's report (after the previous call), this
    call's restore or rewind, the number this call's state will be saved
    under and the runs saved so far; None when saving is off."""
    if not _Durable.dir:
        return None
    if _Durable.kept is None:
        _Durable.kept = _state_runs(_Durable.dir)
    runs = _Durable.kept
    if _Durable.seq is None:
        _Durable.seq = runs[-1] if runs else 0
    out = {"saved": _Durable.report, "restored": _Durable.restore,
           "run": _Durable.seq + 1, "kept": runs[-64:]}
    _Durable.report = None
    _Durable.restore = None
    return out


def _state_small(state):
    """The state report without its name lists (for a frame that must
    shrink)."""
    if not isinstance(state, dict):
        return None
    out = dict(state)
    for key in ("saved", "restored"):
        r = out.get(key)
        if isinstance(r, dict):
            r = dict(r)
            for lst in ("not_saved", "not_restored", "imports", "skipped"):
                if lst in r:
                    r[lst] = r[lst][:3]
            out[key] = r
    return out


def _execute(payload, ns):
    _packages()
    fields = {}
    for tag, value in _tlv(payload):
        fields.setdefault(tag, []).append(value)
    call_id = int(fields[b"n"][-1])
    if b"f" not in fields:
        raise ValueError("exec without a file")
    # id and status first: the agent checks this prefix.
    result = {"id": call_id, "status": "ok", "value": None, "error": None,
              "figures": [], "exit_code": None}
    ctx = _Call(call_id)
    _state_fields(fields)
    _State.ctx = ctx
    try:
        try:
            _restore(fields, ns)
            _call(fields, result, ctx, ns)
        except _StateError as e:
            # The code is not run: the state it expects is not there.
            result["status"] = "error"
            result["error"] = {"ename": "StateError", "evalue": str(e),
                               "traceback": "StateError: %s\n" % e}
            sys.stderr.write("StateError: %s\n" % e)
        finally:
            _State.running = False
    except KeyboardInterrupt as e:
        # SIGINT just as the code ended: the call was interrupted.
        _State.running = False
        _set_error(result, e, "interrupted", os.fsdecode(fields[b"f"][-1]))
    _State.ctx = None
    _flush()
    result["background"] = _background()
    result["state"] = _state_report()
    _send(b"X", _encode(result))
    if result["status"] == "exit":
        os._exit(result["exit_code"] & 0xFF)
    _Durable.pending = bool(_Durable.dir)


def _autosave_when_idle():
    """Saves the state of the last call once no frame has come for
    STATE_IDLE_S: a call that follows at once (a client's loop) runs first,
    and the state after it is saved instead, so back-to-back calls do not
    wait for saves. A frame that comes while the save is being written
    makes the save give up the same way (_CappedWriter): a model's next
    step may come before a large namespace is pickled."""
    if not _Durable.pending or _agent_waiting(STATE_IDLE_S):
        return
    _Durable.pending = False
    _autosave()


def _claim(payload):
    fields = dict(_tlv(payload))
    out = b""
    try:
        os.chdir(os.fsdecode(fields[b"c"]))
        _State.home = os.getcwd()
    except (KeyError, OSError, ValueError) as e:
        out += _record(b"r", "cannot change directory: %s" % e)
    out += _record(b"c", os.fsencode(os.getcwd()))
    _send(b"A", out)


def _on_sigint(signum, frame):
    if _State.running:
        raise KeyboardInterrupt


def _preload(names):
    records = b""
    for name in names:
        try:
            importlib.import_module(name)
            records += _record(b"m", name)
        except BaseException as e:  # noqa: B036 - a bad module must not stop us
            records += _record(b"w", "preload %s failed: %s: %s" % (name, type(e).__name__, e))
    return records


def _orphaned():
    """A control descriptor is gone: the code closed, replaced or broke it.
    The kernel cannot report anything more, so it waits to be killed: the
    agent sees its pipe close and kills it within a second as a protocol
    error, which is what it is (exiting would read as the code's exit())."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        signal.pause()


def main():
    signal.signal(signal.SIGINT, _on_sigint)
    _State.main_ident = _thread.get_ident()
    # Line by line, as on a terminal: print(a, b) is one write (and one
    # frame to the daemon) instead of one per piece; a partial line goes
    # out at the next newline, a flush(), or the end of the call (_flush).
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True, write_through=False)
        except (AttributeError, ValueError, OSError):
            pass
    sys.stdout = _Out(sys.stdout)
    sys.stderr = _Out(sys.stderr)
    os.set_inheritable(FROM_AGENT, False)
    os.set_inheritable(TO_AGENT, False)
    preload = []
    argv = sys.argv[1:]
    if len(argv) == 2 and argv[0] == "--preload":
        preload = [m for m in argv[1].split(",") if m]
    _State.home = os.getcwd()

    # The user's namespace: a fresh __main__ (so pickle finds user classes).
    main_mod = types.ModuleType("__main__")
    main_mod.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main_mod
    ns = main_mod.__dict__
    sys.argv = [""]
    if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(KERNEL_FILE):
        del sys.path[0]
    sys.meta_path.insert(0, _PyplotHook())

    records = _preload(preload)
    # Like a notebook, the working directory's modules can be imported
    # (only now: a file there must not shadow a preloaded module).
    sys.path.insert(0, "")
    _send(b"R", records)

    while True:
        try:
            _autosave_when_idle()
            kind, payload = _recv()
            if kind == b"E":
                _execute(payload, ns)
            elif kind == b"C":
                _claim(payload)
            else:
                os._exit(70)
        except KeyboardInterrupt:
            continue  # SIGINT racing with the end of a call
        except EOFError:
            os._exit(0)
        except OSError:
            _orphaned()
        except (ValueError, KeyError):
            os._exit(70)


if __name__ == "__main__":
    main()
