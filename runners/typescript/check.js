// mcp-sandboxd check_code for TypeScript and JavaScript (the image's
// sandbox.check label): parses the file with Bun's transpiler, the loader
// `bun run` uses for main.ts, and never runs it. Macros are off: a macro
// import would otherwise run code at parse time. Prints the first error as
// "path:line:column: error: message" on stderr and exits 1; exits 0 when
// the file parses.
const path = process.argv[2];
const src = require("fs").readFileSync(path, "utf8");
try {
  new Bun.Transpiler({ loader: "ts", macro: false }).transformSync(src);
} catch (e) {
  const first = (e && Array.isArray(e.errors) && e.errors[0]) || e;
  const pos = (first && first.position) || {};
  const msg = String((first && first.message) || first).replace(/\s+/g, " ");
  if (Number.isInteger(pos.line) && pos.line > 0) {
    const col = Number.isInteger(pos.column) && pos.column > 0 ? pos.column : 1;
    console.error(`${path}:${pos.line}:${col}: error: ${msg}`);
  } else {
    console.error(`error: ${msg}`);
  }
  process.exit(1);
}
