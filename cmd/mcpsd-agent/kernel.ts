// SPDX-License-Identifier: MIT
/*
 * mcp-sandboxd kernel for TypeScript and JavaScript: one persistent global
 * scope per session, on Bun (the image's sandbox.kernel label names it).
 *
 * Started by mcpsd-agent (docs/agent-protocol.md) like kernel.py, with
 * descriptors 0 = /dev/null, 1 and 2 = pipes the agent relays as the call's
 * output, 3 = frames from the agent, 4 = frames to the agent. A frame is a
 * 4-byte big-endian length L, a type byte and L - 1 payload bytes. From the
 * agent: E (run a file) and C (the workspace is ready: change to it), both
 * TLV records (tag byte, 4-byte length, value). To the agent: R once ready
 * (TLV: w = a warning), X with each call's result (JSON, id and status
 * first), A after C (TLV: c = the directory, r = an error).
 *
 * Each call's code goes through Bun's transpiler in its REPL mode: types are
 * stripped (not checked), top-level const/let/function/class/import become
 * properties of the global object (so the next call sees them), the code is
 * wrapped in an async function when it awaits at the top level, and the
 * value of a final expression is returned and shown with Bun.inspect. The
 * result runs through an indirect eval in this process's global scope.
 * Stack frames of the user's code are mapped back to the lines of the
 * code file (the transpiler reprints the code), frames of this file are
 * dropped.
 *
 * Ownership: one call at a time, in the order the agent sends them; the
 * state below belongs to the single JavaScript thread. Between calls the
 * kernel blocks reading descriptor 3, so timers an earlier call left behind
 * wait until the next call (and their output, if any, goes with that call).
 * SIGINT while a call awaits something ends the call as "interrupted" and
 * keeps the state; a call that never yields (a busy loop) cannot be
 * interrupted from inside JavaScript, and the daemon's escalation kills the
 * kernel (state lost, said in the result). Nothing here is saved: a
 * JavaScript heap cannot be serialised in general, so a new kernel starts
 * empty and the session says "new" or "restarted", never "restored".
 */
import { closeSync, openSync, readFileSync, readSync, writeSync } from "node:fs";
import { dirname, isAbsolute, join, resolve as resolvePath } from "node:path";

const FROM_AGENT = 3;
const TO_AGENT = 4;
const FRAME_IN_MAX = 1 << 20; // longest L the agent sends
const FRAME_OUT_MAX = 256 << 10; // longest L the agent accepts
const REPR_MAX = 64 << 10; // bytes of a value's representation
const TRACEBACK_MAX = 32 << 10;
const EVALUE_MAX = 4 << 10;
const SOURCES_KEPT = 256; // calls whose code is kept for older stack frames
const KERNEL_FILE = import.meta.path;

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: false });

// ---- frames -----------------------------------------------------------------

function readExact(n: number): Uint8Array {
  const buf = new Uint8Array(n);
  let got = 0;
  while (got < n) {
    let r: number;
    try {
      r = readSync(FROM_AGENT, buf, got, n - got, null);
    } catch (e: any) {
      if (e?.code === "EINTR" || e?.code === "EAGAIN") continue;
      throw e;
    }
    if (r === 0) throw new EOFError();
    got += r;
  }
  return buf;
}

class EOFError extends Error {}
class ProtocolError extends Error {}

function recv(): [string, Uint8Array] {
  const h = readExact(4);
  const len = ((h[0] << 24) >>> 0) + (h[1] << 16) + (h[2] << 8) + h[3];
  if (len === 0 || len > FRAME_IN_MAX)
    throw new ProtocolError(`bad frame length ${len}`);
  const data = readExact(len);
  return [String.fromCharCode(data[0]), data.subarray(1)];
}

function send(kind: string, payload: Uint8Array) {
  if (payload.length + 1 > FRAME_OUT_MAX) throw new Error("frame too long");
  const out = new Uint8Array(5 + payload.length);
  const len = payload.length + 1;
  out[0] = (len >>> 24) & 0xff;
  out[1] = (len >>> 16) & 0xff;
  out[2] = (len >>> 8) & 0xff;
  out[3] = len & 0xff;
  out[4] = kind.charCodeAt(0);
  out.set(payload, 5);
  let off = 0;
  while (off < out.length) {
    try {
      off += writeSync(TO_AGENT, out, off, out.length - off);
    } catch (e: any) {
      if (e?.code === "EINTR" || e?.code === "EAGAIN") continue;
      throw e;
    }
  }
}

/* The records of a TLV payload, tag to values in order. */
function tlv(p: Uint8Array): Map<string, Uint8Array[]> {
  const out = new Map<string, Uint8Array[]>();
  let i = 0;
  while (i < p.length) {
    if (p.length - i < 5) throw new ProtocolError("truncated record");
    const tag = String.fromCharCode(p[i]);
    const len =
      ((p[i + 1] << 24) >>> 0) + (p[i + 2] << 16) + (p[i + 3] << 8) + p[i + 4];
    i += 5;
    if (len > p.length - i) throw new ProtocolError("truncated record");
    if (!out.has(tag)) out.set(tag, []);
    out.get(tag)!.push(p.subarray(i, i + len));
    i += len;
  }
  return out;
}

function record(tag: string, value: string): Uint8Array {
  const v = encoder.encode(value);
  const out = new Uint8Array(5 + v.length);
  out[0] = tag.charCodeAt(0);
  out[1] = (v.length >>> 24) & 0xff;
  out[2] = (v.length >>> 16) & 0xff;
  out[3] = (v.length >>> 8) & 0xff;
  out[4] = v.length & 0xff;
  out.set(v, 5);
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

function last(fields: Map<string, Uint8Array[]>, tag: string): string | null {
  const v = fields.get(tag);
  return v && v.length ? decoder.decode(v[v.length - 1]) : null;
}

// ---- text -------------------------------------------------------------------

/* s cut to at most limit bytes of UTF-8, with a note when cut. */
function cap(s: string, limit: number): string {
  const b = encoder.encode(s);
  if (b.length <= limit) return s;
  const note = `\n... [truncated: ${b.length} bytes in all]`;
  const keep = Math.max(0, limit - note.length);
  return decoder.decode(b.subarray(0, keep)).replace(/\uFFFD$/, "") + note;
}

// ---- where a stack frame's line is in the user's code ---------------------

/*
 * The transpiler reprints the code, so a line of what runs is not the line
 * the user wrote. Both are the same statements in the same order with the
 * same names and literals (types dropped, declarations turned into
 * assignments), so the lines are aligned by their tokens (the best-scoring
 * order-preserving match, like a diff) and a frame's line is the user's line
 * aligned with it, or the nearest one before it.
 */
const TOKEN =
  /[A-Za-z_$][\w$]*|\d[\w.]*|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`/g;
const NOISE = new Set(["var", "let", "const", "this", "value", "__proto__",
  "null", "return", "async", "await", "import", "default"]);

function lineTokens(line: string): Set<string> {
  const out = new Set<string>();
  for (const t of line.match(TOKEN) ?? []) {
    if (NOISE.has(t)) continue;
    out.add(t[0] === "'" ? `"${t.slice(1, -1)}"` : t);
  }
  return out;
}

function similarity(a: Set<string>, b: Set<string>): number {
  if (!a.size || !b.size) return 0;
  let common = 0;
  for (const t of a) if (b.has(t)) common++;
  return common / (a.size + b.size - common);
}

class LineMap {
  private map: Int32Array | null = null;
  constructor(private src: string, private js: string) {}

  /* The user's line (1-based) for line n of the transpiled code. */
  line(n: number): number {
    if (!this.map) this.map = this.align();
    if (n < 1) return 1;
    return this.map[Math.min(n, this.map.length) - 1];
  }

  private align(): Int32Array {
    const out = this.js.split("\n").map(lineTokens);
    const user = this.src.split("\n").map(lineTokens);
    const n = out.length, m = user.length;
    if (n * m > 4_000_000) return this.proportional(n, m);
    const score = new Float32Array((n + 1) * (m + 1));
    const w = m + 1;
    for (let i = 1; i <= n; i++)
      for (let j = 1; j <= m; j++) {
        const s = similarity(out[i - 1], user[j - 1]);
        const diag = score[(i - 1) * w + j - 1] + (s > 0.2 ? s : 0);
        score[i * w + j] = Math.max(diag, score[(i - 1) * w + j],
          score[i * w + j - 1]);
      }
    const map = new Int32Array(n).fill(0);
    for (let i = n, j = m; i > 0 && j > 0;) {
      const s = similarity(out[i - 1], user[j - 1]);
      if (s > 0.2 &&
          score[i * w + j] === score[(i - 1) * w + j - 1] + s) {
        map[i - 1] = j;
        i--;
        j--;
      } else if (score[i * w + j] === score[(i - 1) * w + j]) {
        i--;
      } else {
        j--;
      }
    }
    // Lines that matched nothing (wrappers) take the previous match's.
    let prev = 1;
    for (let i = 0; i < n; i++) {
      if (map[i]) prev = map[i];
      else map[i] = prev;
    }
    return map;
  }

  private proportional(n: number, m: number): Int32Array {
    const map = new Int32Array(n);
    for (let i = 0; i < n; i++) map[i] = 1 + Math.floor((i * m) / n);
    return map;
  }
}

// ---- state ------------------------------------------------------------------

interface Source {
  call: number;
  map: LineMap;
}

const state = {
  home: process.cwd(), // directory between calls (set by C)
  running: false, // a call's code is running: SIGINT interrupts it
  interrupt: null as null | ((e: Error) => void),
  sources: new Map<string, Source>(), // sourceURL -> its call's code
  call: 0, // the current call's id
  libc: null as any, // dup2 and open, for a call's stdin
};

class KeyboardInterrupt extends Error {
  constructor() {
    super("the call was interrupted (SIGINT)");
    this.name = "Interrupted";
  }
}

function sourceURL(call: number): string {
  return `/sandbox/.mcpsd-call-${call}.ts`;
}

function remember(call: number, src: string, js: string) {
  state.sources.set(sourceURL(call), { call, map: new LineMap(src, js) });
  while (state.sources.size > SOURCES_KEPT) {
    const oldest = state.sources.keys().next().value!;
    state.sources.delete(oldest);
  }
}

/*
 * The stack of e with the user's lines: frames of earlier calls' code are
 * named "main.ts (call N)", this file's frames and the engine's eval frame
 * are dropped.
 */
function userStack(e: any, codeName: string): string {
  const head = `${errorName(e)}: ${errorMessage(e)}`;
  const stack = typeof e?.stack === "string" ? e.stack : "";
  const lines: string[] = [head];
  for (const raw of stack.split("\n")) {
    const frame = raw.trim();
    if (!frame.startsWith("at ")) continue;
    if (frame.includes(KERNEL_FILE) || frame === "at eval (unknown)" ||
        frame.includes("native:") || frame.startsWith("at processTicksAndRejections"))
      continue;
    const m = /^at (?:(.*) \()?(\/sandbox\/\.mcpsd-call-(\d+)\.ts):(\d+):\d+\)?$/
      .exec(frame);
    if (!m) {
      lines.push("    " + frame);
      continue;
    }
    const src = state.sources.get(m[2]);
    const call = Number(m[3]);
    const where = call === state.call ? codeName : `${codeName} (call ${call})`;
    const line = src ? src.map.line(Number(m[4])) : Number(m[4]);
    const fn = !m[1] || m[1] === "<anonymous>" ? "<top level>" : m[1];
    const text = `    at ${fn} (${where}:${line})`;
    // The wrapper the transpiler adds and the script around it.
    if (fn === "<top level>" && lines[lines.length - 1] === text) continue;
    lines.push(text);
  }
  return lines.join("\n") + "\n";
}

function errorName(e: any): string {
  try {
    if (e instanceof Error || (e && typeof e.name === "string"))
      return String(e.name || e.constructor?.name || "Error");
  } catch {}
  return "Uncaught";
}

function errorMessage(e: any): string {
  try {
    if (e instanceof Error || (e && typeof e.message === "string"))
      return String(e.message);
    return Bun.inspect(e);
  } catch {
    return "(the thrown value could not be shown)";
  }
}

function setError(result: any, e: any, status: string, text: string) {
  try {
    process.stderr.write(text);
  } catch {}
  result.status = status;
  result.error = {
    ename: cap(errorName(e), 200),
    evalue: cap(errorMessage(e), EVALUE_MAX),
    traceback: cap(text, TRACEBACK_MAX),
  };
}

// ---- transpiling --------------------------------------------------------------

const transpiler = new Bun.Transpiler({
  loader: "ts",
  replMode: true,
  macro: false,
} as any);

/* A syntax error from the transpiler, as "main.ts:LINE:COL: message". */
function syntaxText(e: any, codeName: string): [string, string] {
  const errs: any[] = Array.isArray(e?.errors) && e.errors.length ? e.errors : [e];
  const out: string[] = [];
  let first = "";
  for (const x of errs.slice(0, 10)) {
    const pos = x?.position ?? {};
    const msg = String(x?.message ?? x).replace(/\s+/g, " ");
    if (!first) first = msg;
    if (Number.isInteger(pos.line) && pos.line > 0) {
      out.push(`${codeName}:${pos.line}:${pos.column ?? 1}: error: ${msg}`);
      if (typeof pos.lineText === "string") {
        out.push("    " + pos.lineText);
        out.push("    " + " ".repeat(Math.max(0, (pos.column ?? 1) - 1)) + "^");
      }
    } else {
      out.push(`${codeName}: error: ${msg}`);
    }
  }
  return [first, out.join("\n") + "\n"];
}

/*
 * Dynamic imports in eval'd code resolve from this file's directory: they
 * are sent to __mcpsd_import instead, which resolves relative paths from
 * the working directory (/data) and packages from the code's directory
 * (its node_modules link holds the conversation's npm packages, then the
 * image's /node_modules). Strings, comments and template literals are left
 * alone.
 */
const IMPORT_CALL =
  /("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`|\/\/[^\n]*|\/\*[\s\S]*?\*\/)|(?<![\w$.])import\s*\(/g;

function routeImports(js: string): string {
  return js.replace(IMPORT_CALL, (m, skip) => (skip ? m : "__mcpsd_import("));
}

function resolveSpecifier(spec: string, codeDir: string): string {
  if (spec.startsWith("./") || spec.startsWith("../") || spec === "." || spec === "..")
    return resolvePath(process.cwd(), spec);
  if (isAbsolute(spec) || /^[a-z][a-z0-9+.-]*:/i.test(spec)) return spec;
  try {
    return Bun.resolveSync(spec, codeDir);
  } catch {
    return spec; // import() says what is missing
  }
}

// ---- a call -------------------------------------------------------------------

/* The call's environment variables, stdin and directory, undone after. */
class CallEnv {
  private saved = new Map<string, string | undefined>();
  private stdin = false;

  apply(fields: Map<string, Uint8Array[]>) {
    for (const raw of fields.get("v") ?? []) {
      const s = decoder.decode(raw);
      const eq = s.indexOf("=");
      if (eq <= 0) continue;
      const name = s.slice(0, eq);
      if (!this.saved.has(name)) this.saved.set(name, process.env[name]);
      process.env[name] = s.slice(eq + 1);
    }
    const cwd = last(fields, "c");
    if (cwd) process.chdir(cwd);
    const input = last(fields, "i");
    if (input) this.redirect(input);
  }

  private redirect(path: string) {
    if (!state.libc) throw new Error("this kernel cannot give a call its stdin (no libc)");
    const fd = openSync(path, "r");
    try {
      if (state.libc.symbols.dup2(fd, 0) < 0)
        throw new Error(`cannot make ${path} the call's stdin`);
      this.stdin = true;
    } finally {
      closeSync(fd);
    }
  }

  undo() {
    for (const [name, old] of this.saved) {
      if (old === undefined) delete process.env[name];
      else process.env[name] = old;
    }
    if (this.stdin) {
      try {
        const fd = openSync("/dev/null", "r");
        state.libc.symbols.dup2(fd, 0);
        closeSync(fd);
      } catch {}
    }
    try {
      process.chdir(state.home);
    } catch {}
  }
}

/* run_code's inputs, when the call has them, as the global `inputs`. */
function loadInputs(codeFile: string) {
  let text: string;
  try {
    text = readFileSync(join(dirname(codeFile), "inputs.json"), "utf8");
  } catch (e: any) {
    if (e?.code === "ENOENT") return;
    throw e;
  }
  (globalThis as any).inputs = JSON.parse(text);
}

function display(value: unknown, codeName: string): any {
  try {
    return { "text/plain": cap(Bun.inspect(value, { depth: 4, colors: false } as any), REPR_MAX) };
  } catch (e) {
    process.stderr.write("the value could not be shown:\n" + userStack(e, codeName));
    return null;
  }
}

/* Runs js; resolves with its { value } or rejects with what it threw. */
function evaluate(js: string): Promise<any> {
  const interrupted = new Promise<never>((_, reject) => {
    state.interrupt = reject;
  });
  let r: any;
  try {
    r = (0, eval)(js);
  } finally {
    if (!(r instanceof Promise)) state.interrupt = null;
  }
  if (!(r instanceof Promise)) return Promise.resolve(r);
  return Promise.race([r, interrupted]).finally(() => {
    state.interrupt = null;
  });
}

async function runCode(fields: Map<string, Uint8Array[]>, result: any) {
  const codeFile = last(fields, "f")!;
  const codeName = codeFile.slice(codeFile.lastIndexOf("/") + 1);
  const src = readFileSync(codeFile, "utf8");
  let js: string;
  try {
    js = transpiler.transformSync(src);
  } catch (e: any) {
    const [msg, text] = syntaxText(e, codeName);
    setError(result, { name: "SyntaxError", message: msg }, "error", text);
    return;
  }
  remember(state.call, src, js);
  js = routeImports(js) + `\n//# sourceURL=${sourceURL(state.call)}\n`;
  const codeDir = dirname(codeFile);
  (globalThis as any).__mcpsd_import = (spec: unknown, opts?: any) =>
    typeof spec === "string"
      ? import(resolveSpecifier(spec, codeDir), opts)
      : import(spec as any, opts);
  state.running = true;
  try {
    const r = await evaluate(js);
    const value = r && typeof r === "object" && "value" in r ? r.value : undefined;
    if (value !== undefined) result.value = display(value, codeName);
  } catch (e: any) {
    setError(result, e, e instanceof KeyboardInterrupt ? "interrupted" : "error",
      userStack(e, codeName));
  } finally {
    state.running = false;
  }
}

/* The X payload, made to fit one frame. */
function encodeResult(result: any): Uint8Array {
  const steps = [
    (r: any) => r.error && (r.error.traceback = cap(r.error.traceback, 8192)),
    (r: any) => r.value && (r.value["text/plain"] = cap(r.value["text/plain"], 16384)),
  ];
  for (let i = 0; i <= steps.length; i++) {
    if (i > 0) steps[i - 1](result);
    const b = encoder.encode(JSON.stringify(result));
    if (b.length + 1 <= FRAME_OUT_MAX) return b;
  }
  return encoder.encode(JSON.stringify({
    id: result.id, status: result.status, value: null, error: null,
    figures: [], exit_code: null,
  }));
}

/*
 * Waits until what the code wrote to stdout and stderr left the process.
 * (Bun makes these streams on first use: 8 ms and 7 MiB more in the box,
 * so they are not made before R; an idle pool box stays small.)
 */
async function drain() {
  for (const s of [process.stdout, process.stderr] as any[]) {
    if (s?.writableNeedDrain)
      await new Promise<void>((ok) => s.once("drain", () => ok()));
  }
}

async function execute(payload: Uint8Array) {
  const fields = tlv(payload);
  const id = Number(last(fields, "n"));
  if (!Number.isSafeInteger(id) || id < 0) throw new ProtocolError("exec without an id");
  if (!fields.has("f")) throw new ProtocolError("exec without a file");
  // id and status first: the agent checks this prefix.
  const result: any = { id, status: "ok", value: null, error: null,
    figures: [], exit_code: null };
  const codeName = basename(last(fields, "f")!);
  const rewind = last(fields, "L");
  state.call = id;
  const env = new CallEnv();
  try {
    if (rewind && rewind !== "latest") {
      // The code is not run: the state it expects is not there.
      const msg = `cannot rewind to run ${rewind}: TypeScript sessions are ` +
        `not saved (a JavaScript heap cannot be written to disk), so there ` +
        `is no earlier state to go back to; run without rewind_to, or with ` +
        `session "new" to start over`;
      setError(result, { name: "StateError", message: msg }, "error",
        `StateError: ${msg}\n`);
    } else {
      env.apply(fields);
      loadInputs(last(fields, "f")!);
      await runCode(fields, result);
    }
  } catch (e: any) {
    setError(result, e, "error", userStack(e, codeName));
  } finally {
    env.undo();
  }
  await drain();
  send("X", encodeResult(result));
}

function basename(p: string): string {
  return p.slice(p.lastIndexOf("/") + 1);
}

function claim(payload: Uint8Array) {
  const fields = tlv(payload);
  const parts: Uint8Array[] = [];
  try {
    process.chdir(last(fields, "c") ?? "");
    state.home = process.cwd();
  } catch (e: any) {
    parts.push(record("r", `cannot change directory: ${e?.message ?? e}`));
  }
  parts.push(record("c", process.cwd()));
  send("A", concat(parts));
}

/*
 * A control descriptor is gone: the code closed or broke it. The kernel
 * cannot report anything more, so it waits to be killed: the agent sees its
 * pipe close and kills it within a second as a protocol error (exiting
 * would read as the code's process.exit()).
 */
function orphaned(): never {
  process.removeAllListeners("SIGINT");
  process.on("SIGINT", () => {});
  const sab = new Int32Array(new SharedArrayBuffer(4));
  for (;;) Atomics.wait(sab, 0, 0);
}

function loadLibc(warnings: Uint8Array[]) {
  try {
    const { dlopen, FFIType } = require("bun:ffi");
    state.libc = dlopen("libc.so.6", {
      dup2: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
    });
  } catch (e: any) {
    warnings.push(record("w", `no stdin for calls: cannot load libc: ${e?.message ?? e}`));
  }
}

async function main() {
  process.on("SIGINT", () => {
    if (state.running && state.interrupt) state.interrupt(new KeyboardInterrupt());
  });
  // A promise nobody awaited, or a timer's callback, that throws: said on
  // stderr (with the call that runs then), as Node's REPL does, instead of
  // ending the process and the session's state.
  process.on("unhandledRejection", (e: any) => {
    try {
      process.stderr.write("Uncaught (in promise) " + userStack(e, "main.ts"));
    } catch {}
  });
  process.on("uncaughtException", (e: any) => {
    try {
      process.stderr.write("Uncaught " + userStack(e, "main.ts"));
    } catch {}
  });
  const records: Uint8Array[] = [];
  loadLibc(records);
  state.home = process.cwd();
  send("R", concat(records));
  for (;;) {
    let kind: string, payload: Uint8Array;
    try {
      [kind, payload] = recv();
    } catch (e) {
      if (e instanceof EOFError) process.exit(0);
      if (e instanceof ProtocolError) process.exit(70);
      orphaned();
    }
    try {
      if (kind === "E") await execute(payload);
      else if (kind === "C") claim(payload);
      else process.exit(70);
    } catch (e) {
      if (e instanceof ProtocolError) process.exit(70);
      orphaned();
    }
  }
}

await main();
