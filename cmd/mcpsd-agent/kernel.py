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
import importlib
import importlib.abc
import io
import json
import linecache
import os
import signal
import sys
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
             "background": result.get("background")}
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
    _State.ctx = ctx
    try:
        try:
            _call(fields, result, ctx, ns)
        finally:
            _State.running = False
    except KeyboardInterrupt as e:
        # SIGINT just as the code ended: the call was interrupted.
        _State.running = False
        _set_error(result, e, "interrupted", os.fsdecode(fields[b"f"][-1]))
    _State.ctx = None
    _flush()
    result["background"] = _background()
    _send(b"X", _encode(result))
    if result["status"] == "exit":
        os._exit(result["exit_code"] & 0xFF)


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
